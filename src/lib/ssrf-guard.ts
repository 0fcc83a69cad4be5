import { AppError } from "./errors";

/**
 * The rules every URL Loom fetches must pass (the fetching itself is `egressFetch` in egress.ts).
 * Two kinds of destination:
 * - a fixed service (`{ allowHosts }`): https on the default port, only the named hosts;
 * - an organization's model server (`{ publicHosts: true, trustedHosts }`): any named public host
 *   over https, any port; the operator's `trustedHosts` (ALLOW_PRIVATE_MODEL_HOSTS) may be private
 *   or loopback and may use http.
 * - a web page a knowledge base indexes (`{ webHosts: true }`): any named public host over https or
 *   plain http (pages are public and many sites still serve http), on the scheme's default port
 *   only, so a public name cannot be used to reach some other service on an odd port.
 * In all, no credentials in the URL and no IP literal in any spelling (decimal, octal, hex, short,
 * IPv6, IPv4-mapped), unless the operator trusted that exact address; open-ended hosts must not be
 * local or private names.
 */
export type UrlRules =
  | { allowHosts: readonly string[] }
  | { publicHosts: true; trustedHosts: readonly string[] }
  | { webHosts: true };

export class BlockedUrlError extends AppError {
  /** The reason without the "refused to fetch" prefix, for field-level (422) messages. */
  readonly reason: string;

  constructor(reason: string) {
    super("bad_request", `refused to fetch: ${reason}`);
    this.reason = reason;
  }
}

const IPV4_DOTTED = /^\d{1,3}(\.\d{1,3}){3}$/;
/** Hosts the WHATWG parser would read as IPv4 (decimal, hex, octal, short forms). */
const IPV4_LIKE = /^(0x[0-9a-f]*|\d+)(\.(0x[0-9a-f]*|\d+)){0,3}\.?$/i;

export function isIpLiteral(host: string): boolean {
  const h = host.toLowerCase();
  return h.startsWith("[") || h.includes(":") || IPV4_DOTTED.test(h) || IPV4_LIKE.test(h);
}

/**
 * Names that mean "this machine" or "the private network": special-use and private-use domains
 * (RFC 6761, RFC 8375, ICANN's .internal, mDNS .local, common LAN suffixes) and public wildcard-DNS
 * services that answer any name with the address written in it (127.0.0.1.nip.io). A public name
 * whose DNS record points at a private address cannot be seen from here; that boundary is the
 * network's (see docs/providers.md, "Outbound requests").
 */
const LOCAL_SUFFIXES = [
  "localhost",
  "local",
  "internal",
  "home.arpa",
  "localdomain",
  "lan",
  "home",
  "corp",
  "intranet",
  "private",
  "test",
  "invalid",
  "in-addr.arpa",
  "ip6.arpa",
];
const LOOPBACK_DNS_SERVICES = [
  "nip.io",
  "sslip.io",
  "xip.io",
  "traefik.me",
  "localtest.me",
  "lvh.me",
  "vcap.me",
  "lacolhost.com",
  "fuf.me",
  "localhost.run",
];

export function isLocalName(host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, "");
  // A single label ("ollama", "metadata", "kubernetes") is resolved by the local search domain.
  if (!h.includes(".")) return true;
  return [...LOCAL_SUFFIXES, ...LOOPBACK_DNS_SERVICES].some((suffix) => h === suffix || h.endsWith(`.${suffix}`));
}

function hostMatches(host: string, rule: string): boolean {
  return rule.startsWith("*.") ? host.endsWith(rule.slice(1)) && host.length > rule.length - 1 : host === rule;
}

/**
 * Whether `url` is on a trusted list of `host` or `host:port` entries (`*.suffix` for any
 * subdomain). Compared on the parsed URL, so 127.1 and 127.0.0.1 name the same trusted address.
 */
function isTrusted(url: URL, trustedHosts: readonly string[]): boolean {
  const host = url.hostname.toLowerCase().replace(/\.$/, "");
  const port = url.port || (url.protocol === "https:" ? "443" : "80");
  return trustedHosts.some((entry) => {
    const match = /^(\[[^\]]+\]|[^:]+)(?::(\d{1,5}))?$/.exec(entry);
    if (!match) return false;
    return hostMatches(host, match[1]) && (match[2] === undefined || match[2] === port);
  });
}

/**
 * Parses an operator's comma-separated `host[:port]` list into canonical entries (lower case, IP
 * spellings normalized by the URL parser, so "127.1:11434" is stored as "127.0.0.1:11434").
 */
export function parseHostList(value: string | undefined): string[] {
  const entries: string[] = [];
  for (const raw of (value ?? "").split(/[\s,]+/)) {
    const entry = raw.trim().toLowerCase();
    if (!entry) continue;
    if (entry.startsWith("*.")) {
      entries.push(entry);
      continue;
    }
    try {
      const url = new URL(`http://${entry}`);
      if (url.pathname !== "/" || url.username || url.search) continue;
      const port = /:(\d{1,5})$/.exec(entry)?.[1];
      entries.push(port ? `${url.hostname}:${port}` : url.hostname);
    } catch {
      // An unreadable entry trusts nothing.
    }
  }
  return entries;
}

/** Throws BlockedUrlError unless `raw` is a URL Loom may fetch under `rules` (a host list means `{ allowHosts }`). */
export function checkUrl(raw: string, rulesOrHosts: UrlRules | readonly string[]): URL {
  const rules: UrlRules = Array.isArray(rulesOrHosts) ? { allowHosts: rulesOrHosts } : (rulesOrHosts as UrlRules);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new BlockedUrlError("not a valid URL");
  }
  if (url.username || url.password) throw new BlockedUrlError("URLs with credentials are not allowed");
  const trusted =
    "trustedHosts" in rules &&
    (url.protocol === "http:" || url.protocol === "https:") &&
    isTrusted(url, rules.trustedHosts);
  if (trusted) return url;
  if ("webHosts" in rules) {
    if (url.protocol !== "https:" && url.protocol !== "http:")
      throw new BlockedUrlError("only http and https URLs are allowed");
    // The parser empties the port when it is the scheme's default.
    if (url.port) throw new BlockedUrlError("only the default port of http or https is allowed");
  } else if (url.protocol !== "https:") throw new BlockedUrlError("only https URLs are allowed");
  if ("allowHosts" in rules && url.port && url.port !== "443")
    throw new BlockedUrlError("only the default https port is allowed");
  // Check the authority as written too: the parser turns 0x7f.1 or 2130706433 into 127.0.0.1.
  const written = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)/i.exec(raw.trim())?.[1] ?? "";
  const writtenHost = written.replace(/^.*@/, "").replace(/:\d*$/, "");
  if (isIpLiteral(url.hostname) || isIpLiteral(writtenHost) || /%[0-9a-f]{2}/i.test(writtenHost))
    throw new BlockedUrlError("IP addresses are not allowed, only named hosts");
  const host = url.hostname.toLowerCase().replace(/\.$/, "");
  if ("allowHosts" in rules) {
    if (!rules.allowHosts.some((rule) => hostMatches(host, rule)))
      throw new BlockedUrlError(`host ${host} is not on the allow-list`);
  } else if (isLocalName(host)) {
    throw new BlockedUrlError(`host ${host} is a local or private name`);
  }
  return url;
}
