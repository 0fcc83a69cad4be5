import { bearer, call, form, json } from "../helpers";

export type Json = Record<string, unknown>;

export async function addAgent(token: string, fields: Json = {}): Promise<Json> {
  const response = await call(
    "/agents/add",
    json(
      {
        name: `agent-${Math.random().toString(36).slice(2, 8)}`,
        description: "Answers questions about aircraft",
        config: { instructions: "be brief" },
        tags: ["aero"],
        ...fields,
      },
      bearer(token),
    ),
  );
  if (response.status !== 200) throw new Error(`add agent: ${response.status} ${await response.text()}`);
  return ((await response.json()) as { agent: Json }).agent;
}

export const get = async (path: string, token: string): Promise<[number, unknown]> => {
  const response = await call(path, { headers: bearer(token) });
  return [response.status, await response.json()];
};

export const send = async (
  path: string,
  token: string,
  method: string,
  fields?: Record<string, string>,
): Promise<[number, Json]> => {
  const response = await call(path, fields ? form(fields, bearer(token), method) : { method, headers: bearer(token) });
  return [response.status, (await response.json()) as Json];
};
