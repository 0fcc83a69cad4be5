import type { Context } from "hono";
import type { AppBindings, Env } from "../env";

/**
 * The bucket every client shares when no client address can be trusted. Any header a client
 * sends it can also forge, so without a trusted header the per-client limits hold for the whole
 * deployment at once: that still caps the work anyone can cause, it just cannot tell clients apart.
 */
export const UNTRUSTED_CLIENT = "untrusted";

/** The header name operators may configure is bounded and plain, so a typo cannot read something odd. */
const HEADER_NAME = /^[a-z0-9-]{1,64}$/;
/** An address: IPv4, IPv6 (with zone or brackets) or a proxy's opaque token; never long. */
const ADDRESS = /^[0-9A-Za-z.:_[\]%-]{1,64}$/;

/**
 * Who a request comes from, for per-client limits (login, signup, deployed chatbots). The address
 * is read only from the header named by TRUST_CLIENT_IP_HEADER: `cf-connecting-ip` is set by
 * Cloudflare's edge and cannot be forged through it, but a Loom reached directly (npm start, a
 * server of your own) receives whatever the client wrote there. A list (`x-forwarded-for`) gives
 * its last entry, the one the nearest proxy added.
 */
export function clientIdentityFrom(env: Pick<Env, "TRUST_CLIENT_IP_HEADER">, headers: Headers): string {
  const name = env.TRUST_CLIENT_IP_HEADER?.trim().toLowerCase();
  if (!name || !HEADER_NAME.test(name)) return UNTRUSTED_CLIENT;
  const raw = headers.get(name);
  const address = raw?.split(",").pop()?.trim().toLowerCase();
  // The trusted proxy always sets it; a request without it (or with nonsense) shares one bucket.
  if (!address || !ADDRESS.test(address)) return `${UNTRUSTED_CLIENT}:${name}`;
  return `ip:${address}`;
}

export function clientIdentity(c: Context<AppBindings>): string {
  return clientIdentityFrom(c.env, c.req.raw.headers);
}
