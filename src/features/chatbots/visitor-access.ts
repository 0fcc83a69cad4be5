import { eq, sql } from "drizzle-orm";
import type { Env } from "../../env";
import { database } from "../../db/client";
import { chatbotRateLimits, chatbots } from "../../db/schema/chatbots";
import { users } from "../../db/schema/identity";
import { AppError, notFound, rateLimited } from "../../lib/errors";
import { sha256Hex } from "../../lib/crypto";
import { signToken, verifyToken } from "../../lib/signed-token";
import { newId } from "../../lib/ids";
import { canRun, DEFAULT_RATE_LIMIT_PER_MINUTE, type AccessSettings, type ChatbotRow } from "./chatbots.service";

/** Visitor sessions last a day; then the visitor starts a new one (and no longer sees the old conversations). */
export const VISITOR_SESSION_TTL_SECONDS = 24 * 60 * 60;

export interface VisitorSession {
  chatbotId: string;
  visitorId: string;
  /** For members-only chatbots: the signed-in member the session was issued to. */
  userId: string | null;
  expiresAt: number;
}

/** A deployed chatbot, else 404: an undeployed chatbot has no public surface at all. */
export async function getDeployedChatbot(env: Env, chatbotId: string): Promise<ChatbotRow> {
  const rows = await database(env).select().from(chatbots).where(eq(chatbots.id, chatbotId)).limit(1);
  if (!rows[0]?.deployed) throw notFound("chatbot");
  return rows[0];
}

export function accessOf(row: ChatbotRow): AccessSettings {
  return row.access;
}

/** Where a visitor request comes from, as the browser reports it. */
export interface RequestOrigin {
  origin: string | undefined;
  /** Loom's own origin: the chat page (/chat/{id}, also inside the widget's iframe) calls from it. */
  self: string;
  /** Sec-Fetch-Site: browsers send no Origin on a same-origin GET, but always this header. */
  fetchSite: string | undefined;
}

/**
 * When the chatbot names allowed origins, a request must come from one of them, or from Loom's own
 * chat page (which a site outside the list cannot frame: its frame-ancestors are the same list).
 */
export function assertOriginAllowed(row: ChatbotRow, from: RequestOrigin): void {
  const allowed = accessOf(row).allowed_origins ?? [];
  if (allowed.length === 0) return;
  const origin = from.origin?.replace(/\/$/, "");
  if (origin === from.self || (!origin && from.fetchSite === "same-origin")) return;
  if (!origin || !allowed.includes(origin)) throw new AppError("forbidden", "this site may not use the chatbot");
}

/** Changes when the access mode or password changes, so earlier sessions stop working. */
async function accessStamp(row: ChatbotRow): Promise<string> {
  const access = accessOf(row);
  return (await sha256Hex(`${access.mode ?? "public"}|${access.password_hash ?? ""}`)).slice(0, 16);
}

export async function issueVisitorSession(
  env: Env,
  row: ChatbotRow,
  userId: string | null,
): Promise<{ token: string; session: VisitorSession }> {
  const now = Math.floor(Date.now() / 1000);
  const session: VisitorSession = {
    chatbotId: row.id,
    visitorId: newId(),
    userId,
    expiresAt: now + VISITOR_SESSION_TTL_SECONDS,
  };
  // `sub` is the signed-in member, as in an access token; the visitor audience keeps the two apart.
  const claims = {
    cb: session.chatbotId,
    vid: session.visitorId,
    sub: userId ?? undefined,
    st: await accessStamp(row),
  };
  return { token: await signToken(env, "visitor", claims, VISITOR_SESSION_TTL_SECONDS, now), session };
}

const sessionRequired = (): AppError =>
  new AppError("unauthorized", "a valid visitor session is required: POST /chatbots/deployed/{chatbot_id}/session");

/** Verifies a visitor session token for this chatbot: signature, audience, expiry, and the current access settings. */
export async function verifyVisitorSession(env: Env, row: ChatbotRow, token: string): Promise<VisitorSession> {
  const claims = await verifyToken(env, "visitor", token);
  if (
    !claims ||
    claims.cb !== row.id ||
    typeof claims.vid !== "string" ||
    (claims.sub !== undefined && typeof claims.sub !== "string") ||
    claims.st !== (await accessStamp(row))
  )
    throw sessionRequired();
  const session: VisitorSession = {
    chatbotId: row.id,
    visitorId: claims.vid,
    userId: typeof claims.sub === "string" ? claims.sub : null,
    expiresAt: Number(claims.exp),
  };
  if (accessOf(row).mode === "members") {
    if (!session.userId) throw sessionRequired();
    // Checked on every request, not only when the session was issued: a member deleted, suspended,
    // moved out of the organization or dropped from the chatbot's runners loses access at once.
    const member = await database(env)
      .select({ orgId: users.orgId, role: users.role, suspended: users.suspended })
      .from(users)
      .where(eq(users.id, session.userId))
      .limit(1);
    if (!member[0] || member[0].suspended || member[0].orgId !== row.orgId) throw sessionRequired();
    if (!canRun(row, { userId: session.userId, role: member[0].role }))
      throw new AppError("forbidden", "only permitted members of the chatbot's organization may use it");
  }
  return session;
}

/**
 * Counts one request against `key` in the current one-minute window; over `limit` answers 429.
 * One atomic upsert, so concurrent requests cannot slip past the count.
 */
export async function consumeRateLimit(env: Env, key: string, limit: number): Promise<void> {
  const window = Math.floor(Date.now() / 60_000);
  const [row] = await database(env)
    .insert(chatbotRateLimits)
    .values({ key, windowStart: window, count: 1 })
    .onConflictDoUpdate({
      target: chatbotRateLimits.key,
      // SQLite evaluates every assignment against the row as it was, so the CASE sees the old window.
      set: {
        count: sql`CASE WHEN ${chatbotRateLimits.windowStart} = ${window} THEN ${chatbotRateLimits.count} + 1 ELSE 1 END`,
        windowStart: window,
      },
    })
    .returning({ count: chatbotRateLimits.count });
  const retryAfter = 60 - (Math.floor(Date.now() / 1000) % 60);
  if ((row?.count ?? 0) > limit)
    throw rateLimited("too many requests to this chatbot: try again in a minute", retryAfter);
}

export function visitorRateLimit(row: ChatbotRow): number {
  return accessOf(row).rate_limit_per_minute ?? DEFAULT_RATE_LIMIT_PER_MINUTE;
}

const DEPLOYED_PATH = /^\/chatbots\/deployed\/([0-9a-f]{24})(?:\/|$)/;

/**
 * The Access-Control-Allow-Origin for a visitor route: the caller's origin when the chatbot in the
 * path allows it (its allowed origins, or any origin when it names none), else none, so a refused
 * site's script cannot read the answer even of a route that would not refuse it. Routes that name
 * the chatbot in the body (feedback, upload) reflect the origin and refuse with 403 themselves.
 */
export async function corsOriginFor(env: Env, path: string, origin: string): Promise<string | null> {
  const id = DEPLOYED_PATH.exec(path)?.[1];
  if (!id) return origin;
  const rows = await database(env)
    .select({ access: chatbots.access, deployed: chatbots.deployed })
    .from(chatbots)
    .where(eq(chatbots.id, id))
    .limit(1);
  if (!rows[0]?.deployed) return null;
  const allowed = rows[0].access.allowed_origins ?? [];
  return allowed.length === 0 || allowed.includes(origin.replace(/\/$/, "")) ? origin : null;
}
