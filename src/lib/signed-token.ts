import { sign, verify } from "hono/jwt";
import type { JWTPayload } from "hono/utils/jwt/types";
import type { Env } from "../env";
import { requireSecret } from "./config";
import { AppError } from "./errors";

/**
 * Loom's one signed-token format: HS256 JWTs (hono/jwt) signed with JWT_SECRET. Each kind of token
 * carries its own audience, and verification demands it, so one kind can never stand in for
 * another (a chatbot visitor's session is not an access token, and an access token opens no
 * visitor session), although both are signed with the same secret.
 */
export const TOKEN_AUDIENCE = {
  /** Access tokens from /auth/signup and /auth/login, for the routes outside /v1. */
  access: "loom:access",
  /** Visitor sessions of a deployed chatbot (POST /chatbots/deployed/{id}/session). */
  visitor: "loom:chatbot-visitor",
} as const;

export type TokenKind = keyof typeof TOKEN_AUDIENCE;

/** The claims a caller gives; audience, issue time and expiry are set here. */
export type TokenClaims = Record<string, string | number | null | undefined>;

/** Signs `claims` as a token of `kind` that expires `ttlSeconds` after `nowSeconds`. */
export function signToken(
  env: Env,
  kind: TokenKind,
  claims: TokenClaims,
  ttlSeconds: number,
  nowSeconds = Math.floor(Date.now() / 1000),
): Promise<string> {
  const payload: JWTPayload = { ...claims, aud: TOKEN_AUDIENCE[kind], iat: nowSeconds, exp: nowSeconds + ttlSeconds };
  return sign(payload, requireSecret(env, "JWT_SECRET"), "HS256");
}

/**
 * The claims of a valid token of `kind`, else null: bad signature, another kind's audience, no
 * audience, expired, or no numeric `exp` (one without would be valid forever).
 */
export async function verifyToken(env: Env, kind: TokenKind, token: string): Promise<JWTPayload | null> {
  let payload: JWTPayload;
  try {
    payload = await verify(token, requireSecret(env, "JWT_SECRET"), { alg: "HS256", aud: TOKEN_AUDIENCE[kind] });
  } catch (error) {
    // A missing JWT_SECRET is the server's fault (500 with its own message), not the caller's.
    if (error instanceof AppError) throw error;
    return null;
  }
  return typeof payload.exp === "number" ? payload : null;
}
