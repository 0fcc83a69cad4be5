import type { Context, MiddlewareHandler } from "hono";
import type { OpenAPIHono } from "@hono/zod-openapi";
import { z } from "@hono/zod-openapi";
import type { AppBindings, Role } from "../env";
import { AppError, type ValidationIssue } from "./errors";
import { MAX_ANONYMOUS_BODY_BYTES, MAX_BODY_BYTES, parseBodyBytes } from "./body";
import { unknownFields } from "./unknown-fields";
import { authenticate, requireRole, type AuthMode } from "../middleware/auth";
import { bodyCap, cappedBody } from "../middleware/body-cap";

/** Group A is the public API under /v1; Group B the application backend at the root. */
export type RouteGroup = "A" | "B";

type AnyObjectSchema = z.ZodObject<z.ZodRawShape>;
type BodySchema = z.ZodType<Record<string, unknown>>;

export interface RouteSpec<P extends AnyObjectSchema | undefined, Q extends AnyObjectSchema | undefined, B extends BodySchema | undefined> {
  method: "get" | "post" | "put" | "patch" | "delete";
  /** Hono path syntax (`/v1/knowledge-base/:id`); documented as `{id}`. */
  path: string;
  group: RouteGroup;
  auth: AuthMode | "none";
  /** The least role that may call this route. */
  minRole?: Role;
  tags: readonly string[];
  summary: string;
  description?: string;
  params?: P;
  query?: Q;
  body?: B;
  /**
   * Largest request body this route reads, in bytes: routes with a `body` schema default to
   * MAX_BODY_BYTES (MAX_ANONYMOUS_BODY_BYTES without auth); a route that reads its raw body
   * itself (a webhook) must set it.
   */
  maxBodyBytes?: number;
  /** Extra documented responses, by status. */
  responses?: Record<number, string>;
  /** Documents the response as server-sent events too. */
  streams?: boolean;
}

type Infer<S> = S extends z.ZodType ? z.output<S> : Record<string, never>;

export interface RouteInput<P, Q, B> {
  params: Infer<P>;
  query: Infer<Q>;
  body: Infer<B>;
}

const BODY_TYPES_A = ["application/json", "multipart/form-data", "application/x-www-form-urlencoded"] as const;
const BODY_TYPES_B = ["application/x-www-form-urlencoded", "multipart/form-data", "application/json"] as const;

function toIssues(error: z.ZodError, where: string): ValidationIssue[] {
  return error.issues.map((issue) => ({ loc: [where, ...issue.path.map((p) => (typeof p === "symbol" ? String(p) : p))], msg: issue.message, type: issue.code }));
}

/** Group A names the failing field in one sentence; Group B answers 422 with every issue. */
function validationError(group: RouteGroup, issues: ValidationIssue[]): AppError {
  if (group === "B") return new AppError("validation", "request validation failed", { issues });
  const first = issues[0];
  const field = first.loc.slice(1).join(".");
  const message = field ? `${field}: ${first.msg}` : first.msg;
  return new AppError("bad_request", message);
}

function validate<S extends z.ZodType | undefined>(schema: S, value: unknown, where: string, group: RouteGroup): Infer<S> {
  if (!schema) return {} as Infer<S>;
  const result = schema.safeParse(value);
  if (!result.success) throw validationError(group, toIssues(result.error, where));
  return result.data as Infer<S>;
}

function queryObject(c: Context<AppBindings>): Record<string, string | string[]> {
  const all = c.req.queries();
  const out: Record<string, string | string[]> = {};
  for (const [key, values] of Object.entries(all)) out[key] = values.length === 1 ? values[0] : values;
  return out;
}

/**
 * Declares one route: registers it in the OpenAPI document from the same zod schemas it
 * validates with, and mounts a handler that sets the error group, authenticates, checks the
 * role, caps the body's size while it streams in, parses it (JSON, multipart or urlencoded) and
 * validates every input before the handler sees it. Auth is attached to the route itself, so no
 * path spelling can skip it.
 */
export function defineRoute<
  P extends AnyObjectSchema | undefined = undefined,
  Q extends AnyObjectSchema | undefined = undefined,
  B extends BodySchema | undefined = undefined,
>(
  app: OpenAPIHono<AppBindings>,
  spec: RouteSpec<P, Q, B>,
  handler: (c: Context<AppBindings>, input: RouteInput<P, Q, B>) => Response | Promise<Response>,
): void {
  const openApiPath = spec.path.replace(/:([A-Za-z_]+)/g, "{$1}");
  const bodyTypes = spec.group === "A" ? BODY_TYPES_A : BODY_TYPES_B;
  const responses: Record<string, { description: string; content?: Record<string, { schema: z.ZodType }> }> = {
    200: { description: "Success", content: spec.streams ? { "application/json": { schema: z.object({}).passthrough() }, "text/event-stream": { schema: z.string() } } : undefined },
  };
  for (const [status, description] of Object.entries(spec.responses ?? {})) responses[status] = { description };
  if (spec.auth !== "none") responses[401] = { description: "Missing or invalid credentials" };
  if (spec.body || spec.query || spec.params) responses[spec.group === "A" ? 400 : 422] = { description: "Invalid input" };
  const maxBodyBytes = spec.maxBodyBytes ?? (spec.body ? (spec.auth === "none" ? MAX_ANONYMOUS_BODY_BYTES : MAX_BODY_BYTES) : undefined);
  if (maxBodyBytes !== undefined) responses[413] ??= { description: `Request body over ${maxBodyBytes} bytes` };

  app.openAPIRegistry.registerPath({
    method: spec.method,
    path: openApiPath,
    tags: [...spec.tags],
    summary: spec.summary,
    description: spec.description,
    security: spec.auth === "none" ? [] : [{ bearer: [] }],
    request: {
      params: spec.params,
      query: spec.query,
      body: spec.body ? { content: Object.fromEntries(bodyTypes.map((type) => [type, { schema: spec.body as z.ZodType }])) } : undefined,
    },
    responses,
  });

  // Credentials are checked before the body is read, so nobody without them makes Loom read a body.
  const admit: MiddlewareHandler<AppBindings> = async (c, next) => {
    c.set("group", spec.group);
    if (spec.auth !== "none") {
      const auth = await authenticate(c, spec.auth);
      if (spec.minRole) requireRole(auth, spec.minRole);
    }
    await next();
  };
  const cap: MiddlewareHandler<AppBindings> = maxBodyBytes === undefined ? (_c, next) => next() : bodyCap(maxBodyBytes);

  app.on(spec.method.toUpperCase(), spec.path, admit, cap, async (c) => {
    const params = validate(spec.params, c.req.param(), "path", spec.group);
    const query = validate(spec.query, queryObject(c), "query", spec.group);
    const rawBody = spec.body ? await parseBodyBytes(cappedBody(c), c.req.header("content-type") ?? "") : {};
    const body = spec.body ? validate(spec.body, rawBody, "body", spec.group) : ({} as Infer<B>);
    // Group A answers as before, plus a warning per field it dropped (src/middleware/warnings.ts).
    if (spec.body && spec.group === "A") c.set("warnings", unknownFields(spec.body, rawBody).map((field) => `unknown field ${field} ignored`));
    return handler(c, { params, query, body } as RouteInput<P, Q, B>);
  });
}
