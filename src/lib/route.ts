import type { Context, MiddlewareHandler, TypedResponse } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { JSONParsed } from "hono/utils/types";
import type { OpenAPIHono } from "@hono/zod-openapi";
import { z } from "@hono/zod-openapi";
import { getRefId } from "@asteasolutions/zod-to-openapi";
import type { AppBindings, Role } from "../env";
import { AppError, type ValidationIssue } from "./errors";
import { MAX_ANONYMOUS_BODY_BYTES, MAX_BODY_BYTES, parseBodyBytes } from "./body";
import { unknownFields } from "./unknown-fields";
import { authenticate, requireRole, type AuthMode, type Prefetch } from "../middleware/auth";
import { bodyCap, cappedBody } from "../middleware/body-cap";
import { errorResponses } from "./route-responses";

/** Group A is the public API under /v1; Group B the application backend at the root. */
export type RouteGroup = "A" | "B";

type AnyObjectSchema = z.ZodObject<z.ZodRawShape>;
type BodySchema = z.ZodType<Record<string, unknown>>;

export interface RouteSpec<
  P extends AnyObjectSchema | undefined,
  Q extends AnyObjectSchema | undefined,
  B extends BodySchema | undefined,
  R extends z.ZodType | undefined = undefined,
> {
  method: "get" | "post" | "put" | "patch" | "delete";
  /** Hono path syntax (`/v1/knowledge-base/:id`); documented as `{id}`. */
  path: string;
  group: RouteGroup;
  auth: AuthMode | "none";
  /** The least role that may call this route. */
  minRole?: Role;
  /**
   * A read the route needs on every call, sent to D1 in the API key's own round trip (see
   * authenticate); its rows reach the handler as `c.get("prefetched")` only once the key is valid.
   */
  prefetch?: Prefetch;
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
  /** The route's own failure statuses, by status; auth, input, size and rate-limit failures are added. */
  responses?: Record<number, string>;
  /** The success body's schema: documented, and the handler's JSON reply must match it to compile. */
  response?: R;
  /** The success status, when not 200. */
  successStatus?: 200 | 201 | 202;
  /** Documents the response as server-sent events too. */
  streams?: boolean;
  /** A non-JSON success body (a file, audio): its content type, documented instead of a schema. */
  produces?: string;
}

/**
 * What a handler may return: a JSON reply whose body matches the declared success schema, or
 * (streams and files, routes without a schema) any Response.
 */
export type RouteReply<R> = R extends z.ZodType
  ? Response & TypedResponse<JSONParsed<z.input<R>>, ContentfulStatusCode, "json">
  : Response;

declare const streamed: unique symbol;
/** A streamed or file reply of a route that otherwise answers JSON: marked, so it is never a JSON reply by accident. */
export type StreamReply = Response & { readonly [streamed]: true };
/** Marks a Response as the route's documented stream or file (see `streams` / `produces`). */
export const asStream = (response: Response): StreamReply => response as StreamReply;

type Infer<S> = S extends z.ZodType ? z.output<S> : Record<string, never>;

export interface RouteInput<P, Q, B> {
  params: Infer<P>;
  query: Infer<Q>;
  body: Infer<B>;
}

const BODY_TYPES_A = ["application/json", "multipart/form-data", "application/x-www-form-urlencoded"] as const;
const BODY_TYPES_B = ["application/x-www-form-urlencoded", "multipart/form-data", "application/json"] as const;

function toIssues(error: z.ZodError, where: string): ValidationIssue[] {
  return error.issues.map((issue) => ({
    loc: [where, ...issue.path.map((p) => (typeof p === "symbol" ? String(p) : p))],
    msg: issue.message,
    type: issue.code,
  }));
}

/** Group A names the failing field in one sentence; Group B answers 422 with every issue. */
function validationError(group: RouteGroup, issues: ValidationIssue[]): AppError {
  if (group === "B") return new AppError("validation", "request validation failed", { issues });
  const first = issues[0];
  const field = first.loc.slice(1).join(".");
  const message = field ? `${field}: ${first.msg}` : first.msg;
  return new AppError("bad_request", message);
}

function validate<S extends z.ZodType | undefined>(
  schema: S,
  value: unknown,
  where: string,
  group: RouteGroup,
): Infer<S> {
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

/** The declared success status; a 2xx listed under `responses` names it too. */
function successStatusOf(spec: { successStatus?: number; responses?: Record<number, string> }): number {
  const listed = Object.keys(spec.responses ?? {})
    .map(Number)
    .find((status) => status >= 200 && status < 300);
  return spec.successStatus ?? listed ?? 200;
}

/** The success body's content types: its JSON schema, SSE for streams, the file's type for files. */
/** Group A's note of body fields it ignored (src/middleware/warnings.ts), on any success object. */
const Warnings = z
  .array(z.string())
  .openapi({ description: "Body fields the route ignored (unknown field X ignored); only when there were any" });

const withWarningsCache = new WeakMap<z.ZodType, z.ZodType>();

/**
 * A Group A route that reads a body may add `warnings` to its success object: documented on each
 * object the schema answers. A named schema keeps a name (`<Name>WithWarnings`), so the success
 * stays a `$ref` a client can type.
 */
function withWarnings(schema: z.ZodType): z.ZodType {
  const cached = withWarningsCache.get(schema);
  if (cached) return cached;
  let out: z.ZodType = schema;
  if (schema instanceof z.ZodObject) out = schema.extend({ warnings: Warnings.optional() });
  else if (schema instanceof z.ZodUnion)
    out = z.union((schema.options as readonly z.ZodType[]).map(withWarnings) as [z.ZodType, z.ZodType, ...z.ZodType[]]);
  const name = getRefId(schema);
  if (name && out !== schema) out = out.openapi(`${name}WithWarnings`);
  withWarningsCache.set(schema, out);
  return out;
}

function successContent(spec: {
  group: RouteGroup;
  body?: unknown;
  response?: z.ZodType;
  streams?: boolean;
  produces?: string;
}): Record<string, { schema: z.ZodType }> {
  const content: Record<string, { schema: z.ZodType }> = {};
  const response = spec.response && spec.group === "A" && spec.body ? withWarnings(spec.response) : spec.response;
  content["application/json"] = { schema: response ?? z.record(z.string(), z.unknown()) };
  if (spec.streams)
    content["text/event-stream"] = { schema: z.string().openapi({ description: "Server-sent events" }) };
  if (spec.produces) {
    if (!response) delete content["application/json"];
    content[spec.produces] = { schema: z.string().openapi({ format: "binary" }) };
  }
  return content;
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
  R extends z.ZodType | undefined = undefined,
>(
  app: OpenAPIHono<AppBindings>,
  spec: RouteSpec<P, Q, B, R>,
  handler: (
    c: Context<AppBindings>,
    input: RouteInput<P, Q, B>,
  ) => RouteReply<R> | StreamReply | Promise<RouteReply<R> | StreamReply>,
): void {
  const openApiPath = spec.path.replace(/:([A-Za-z_]+)/g, "{$1}");
  const bodyTypes = spec.group === "A" ? BODY_TYPES_A : BODY_TYPES_B;
  const maxBodyBytes =
    spec.maxBodyBytes ?? (spec.body ? (spec.auth === "none" ? MAX_ANONYMOUS_BODY_BYTES : MAX_BODY_BYTES) : undefined);
  const responses: Record<string, { description: string; content?: Record<string, { schema: z.ZodType }> }> = {
    ...errorResponses({
      group: spec.group,
      authenticated: spec.auth !== "none",
      hasRole: spec.minRole !== undefined,
      hasInput: Boolean(spec.body || spec.query || spec.params),
      hasBody: maxBodyBytes !== undefined,
      extra:
        maxBodyBytes === undefined
          ? (spec.responses ?? {})
          : { 413: `Request body over ${maxBodyBytes} bytes`, ...spec.responses },
    }),
    [successStatusOf(spec)]: { description: "Success", content: successContent(spec) },
  };

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
      body: spec.body
        ? { content: Object.fromEntries(bodyTypes.map((type) => [type, { schema: spec.body as z.ZodType }])) }
        : undefined,
    },
    responses,
  });

  // Credentials are checked before the body is read, so nobody without them makes Loom read a body.
  const admit: MiddlewareHandler<AppBindings> = async (c, next) => {
    c.set("group", spec.group);
    if (spec.auth !== "none") {
      const auth = await authenticate(c, spec.auth, spec.prefetch);
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
    if (spec.body && spec.group === "A")
      c.set(
        "warnings",
        unknownFields(spec.body, rawBody).map((field) => `unknown field ${field} ignored`),
      );
    return handler(c, { params, query, body } as RouteInput<P, Q, B>);
  });
}
