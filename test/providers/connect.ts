import { bearer, call, json, type Org } from "../helpers";

/** Adds a connection to the organization through the admin API, as an owner would. */
export async function connect(org: Org, body: Record<string, unknown>): Promise<void> {
  const response = await call("/admin/connections/create", json(body, bearer(org.owner.token)));
  if (response.status !== 201 && response.status !== 200)
    throw new Error(`connection create failed: ${response.status} ${await response.text()}`);
}

/** Fast retries for tests: no real waiting between attempts. */
export const instant = { retryBaseMs: 1, sleep: async () => undefined };
