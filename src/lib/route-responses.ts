import { z } from "@hono/zod-openapi";
import type { RouteGroup } from "./route";

/** Group A's error envelope (`/v1`): every failure but its 401. */
export const GroupAError = z
  .object({ status: z.literal("failed"), error: z.string() })
  .openapi("GroupAError", { description: "A failed Group A (/v1) request." });

/** Group A's 401: the bare `{error}` body the seed's clients read. */
export const Unauthorized = z
  .object({ error: z.string() })
  .openapi("Unauthorized", { description: "Missing or invalid API key (Group A)." });

/** Group B's error envelope: a sentence in `detail`. */
export const GroupBError = z
  .object({ detail: z.string() })
  .openapi("GroupBError", { description: "A failed Group B request." });

const ValidationError = z
  .object({ loc: z.array(z.union([z.string(), z.number()])), msg: z.string(), type: z.string() })
  .openapi("ValidationError");

/** Group B's 422: every problem with the request, each with where it is. */
export const HTTPValidationError = z.object({ detail: z.array(ValidationError) }).openapi("HTTPValidationError");

/** What a route may answer besides its success, so a generated client types every branch. */
export interface ResponseFacts {
  group: RouteGroup;
  authenticated: boolean;
  hasRole: boolean;
  hasInput: boolean;
  hasBody: boolean;
  /** The route's own failure statuses (404, 409 ...) with what they mean. */
  extra: Record<number, string>;
}

const GENERIC: Record<number, string> = {
  400: "Bad request",
  401: "Missing or invalid credentials",
  403: "Not allowed for your role",
  404: "Not found",
  409: "Conflict",
  413: "Request body too large",
  422: "Validation error",
  429: "Too many requests (Retry-After says when to come back)",
  500: "Internal error (details go to the log, never the body)",
  502: "A model provider failed",
  503: "Not configured or temporarily unavailable",
};

type Documented = { description: string; content: Record<string, { schema: z.ZodType }> };

function errorSchema(group: RouteGroup, status: number): z.ZodType {
  if (group === "A") return status === 401 ? Unauthorized : GroupAError;
  return status === 422 ? HTTPValidationError : GroupBError;
}

/** Every error status a route can answer, each with its group's body schema. */
export function errorResponses(facts: ResponseFacts): Record<string, Documented> {
  const statuses = new Map<number, string>();
  const add = (status: number, description?: string): void => {
    if (!statuses.has(status)) statuses.set(status, description ?? GENERIC[status] ?? "Error");
  };
  for (const [status, description] of Object.entries(facts.extra))
    if (Number(status) >= 400) add(Number(status), description);
  if (facts.authenticated) {
    add(401);
    add(429);
  }
  if (facts.hasRole) add(403);
  // Group B parses bodies before validating them (malformed JSON or form data is a 400); Group A
  // reports every input problem as a 400.
  if (facts.hasBody || (facts.group === "A" && facts.hasInput)) add(400);
  if (facts.group === "B" && facts.hasInput) add(422);
  if (facts.hasBody) add(413);
  add(500);
  const out: Record<string, Documented> = {};
  for (const [status, description] of statuses) {
    out[status] = { description, content: { "application/json": { schema: errorSchema(facts.group, status) } } };
  }
  return out;
}
