import { beforeAll, describe, expect, it } from "vitest";
import fc from "fast-check";
import { bearer, call } from "../helpers";
import {
  bodyFields,
  bodyRoutes,
  CATALOGUE,
  clearlyInvalid,
  hostileValue,
  type BodyField,
  type BodyRoute,
  type HostileValue,
  type JsonSchema,
  type OpenApiDoc,
} from "./hostile-values";
import { concretePath, seedSweep, storedFingerprint, validValue, type SweepSeed } from "./hostile-seed";

/**
 * Every body field of every documented route, sent hostile values (hostile-values.ts) as JSON,
 * urlencoded and multipart, with the other fields valid and aimed at seeded records. No answer may
 * be a 5xx; a value the documented schema refuses must be refused (4xx); and a refused request
 * must store nothing. Fixed seed and a fixed number of values per field, so a run is repeatable and
 * bounded in time.
 */
const SEED = 20261122;
const VALUES_PER_FIELD = 3;
const ENCODINGS = ["json", "urlencoded", "multipart"] as const;
type Encoding = (typeof ENCODINGS)[number];

/** Optional fields given valid values, so requests get past "nothing to do" into the services. */
const OPTIONAL_INCLUDED = new Set([
  "visitor_session",
  "text",
  "query",
  "file_data",
  "inputs",
  "knowledge_base_ids",
  "language",
  "like",
  "connection_id",
  "user_ids",
  "edges",
]);

/**
 * Known failures another engineer is fixing in parallel, each naming the item of security issue 11
 * it belongs to; the lead removes an entry after merging its fix. Empty: of the three such items,
 * the sweep reached one (a deeply nested agent config, a 500 before) and the body depth bound fixes
 * it for every route. The other two answer 2xx here: `{"$ref": "#"}` as an input schema is stored
 * and only used when that transformation runs (the sweep runs a seeded one), and a file's text is
 * parsed during background indexing, after the response.
 */
const KNOWN_EXCEPTIONS: { owner: string; matches: (route: string, field: string, value: string) => boolean }[] = [];

const doc = (await (await call("/openapi.json")).json()) as OpenApiDoc;
/** Visitor routes first (a later settings change could rate-limit them), deletions last (they remove seeded records). */
const order = (r: BodyRoute): number =>
  r.path.includes("/deployed/") || r.path === "/chatbots/upload"
    ? 0
    : r.method === "delete" || r.path.includes("/undeploy/")
      ? 2
      : 1;
const ROUTES = bodyRoutes(doc).sort((a, b) => order(a) - order(b));

function example(schema: JsonSchema): unknown {
  if (Array.isArray(schema.enum)) return schema.enum[0];
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  if (type === "integer" || type === "number") return typeof schema.minimum === "number" ? schema.minimum : 1;
  if (type === "boolean") return false;
  if (type === "array") return [];
  if (type === "object") return {};
  return "x".repeat(typeof schema.minLength === "number" ? Math.max(1, schema.minLength) : 1);
}

function baseBody(seed: SweepSeed, route: BodyRoute, label: string): Record<string, unknown> {
  const required = new Set((route.schema.required as string[] | undefined) ?? []);
  const body: Record<string, unknown> = {};
  for (const [name, field] of Object.entries((route.schema.properties ?? {}) as Record<string, JsonSchema>)) {
    if (!required.has(name) && !OPTIONAL_INCLUDED.has(name)) continue;
    const value = validValue(seed, label, name) ?? (required.has(name) ? example(field) : undefined);
    if (value !== undefined) body[name] = value;
  }
  return body;
}

const PLACEHOLDER = "\u0000hostile\u0000";

/** The base body with the hostile value at `path`, as JSON text (raw, so deep and __proto__ values survive). */
function jsonBody(base: Record<string, unknown>, path: string[], value: HostileValue): string {
  const body = structuredClone(base);
  let node = body;
  for (const part of path.slice(0, -1)) {
    const child = node[part];
    node = (node[part] = child && typeof child === "object" && !Array.isArray(child) ? child : {}) as Record<
      string,
      unknown
    >;
  }
  node[path[path.length - 1]] = PLACEHOLDER;
  return JSON.stringify(body).replace(JSON.stringify(PLACEHOLDER), () => value.json);
}

/** Form fields: nested objects spread over dotted names, arrays as JSON text; the hostile value replaces its field's subtree. */
function formFields(base: Record<string, unknown>, path: string[], value: HostileValue): [string, string][] {
  const hostileName = path.join(".");
  const fields: [string, string][] = [];
  const walk = (node: unknown, name: string): void => {
    if (name === hostileName || name.startsWith(`${hostileName}.`)) return;
    if (node && typeof node === "object" && !Array.isArray(node))
      for (const [k, v] of Object.entries(node)) walk(v, name ? `${name}.${k}` : k);
    else fields.push([name, typeof node === "string" ? node : JSON.stringify(node)]);
  };
  walk(base, "");
  fields.push([hostileName, value.form]);
  return fields;
}

function encode(encoding: Encoding, base: Record<string, unknown>, path: string[], value: HostileValue): RequestInit {
  if (encoding === "json")
    return { headers: { "content-type": "application/json" }, body: jsonBody(base, path, value) };
  const fields = formFields(base, path, value);
  if (encoding === "urlencoded")
    return {
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(fields).toString(),
    };
  const data = new FormData();
  for (const [name, text] of fields) data.append(name, text);
  return { body: data };
}

let seed: SweepSeed;
let lastFingerprint: string | undefined;
beforeAll(async () => {
  seed = await seedSweep();
}, 60_000);

interface Probe {
  label: string;
  field: string;
  value: string;
  encoding: string;
  init: RequestInit;
  mustRefuse: boolean;
}

/**
 * 502 is the documented answer when an outside service fails. Tests have no network, so a hostile
 * but valid value that reaches one (an encyclopedia article title, a model option) lands there.
 */
const isCrash = (status: number): boolean => status >= 500 && status !== 502;

/** Sends one probe; answers what was wrong with the answer, if anything. */
async function send(route: BodyRoute, probe: Probe): Promise<string | null> {
  const credential = route.path.startsWith("/v1/") ? seed.org.owner.apiKey : seed.org.owner.token;
  const headers = { ...(probe.init.headers as Record<string, string> | undefined), ...bearer(credential) };
  // The last refused probe left nothing behind, so its fingerprint is still current.
  const before = lastFingerprint ?? (await storedFingerprint());
  lastFingerprint = undefined;
  const response = await call(concretePath(seed, route.path), {
    method: route.method.toUpperCase(),
    ...probe.init,
    headers,
  });
  const answer = (await response.text()).slice(0, 160);
  const where = `${probe.label} ${probe.field}=${probe.value} [${probe.encoding}] -> ${response.status} ${answer}`;
  const known = KNOWN_EXCEPTIONS.find((e) => e.matches(probe.label, probe.field, probe.value));
  if (known && isCrash(response.status)) {
    // Printed so the lead sees whether a known exception still happens, and removes it once it does not.
    console.warn(`known exception (${known.owner}): ${where}`);
    return null;
  }
  if (probe.mustRefuse && response.status < 400) return `accepted an invalid value: ${where}`;
  if (response.status < 400) return null;
  const after = await storedFingerprint();
  if (after !== before) return `stored something although refused: ${where}`;
  lastFingerprint = after;
  return isCrash(response.status) ? `5xx: ${where}` : null;
}

const named = (name: string): HostileValue => CATALOGUE.find((v) => v.name === name) as HostileValue;

/** Values aimed at what a field holds, sent every run whatever the random draw: files get bad base64, free-form objects deep and self-referencing JSON. */
function targeted(field: BodyField): [HostileValue, Encoding][] {
  const name = field.path[field.path.length - 1];
  if (/raw_bytes|audio|^file$/.test(name))
    return [
      [named("invalid base64"), "json"],
      [named("base64 of a deep JSON document"), "json"],
    ];
  const schema = field.schema;
  const freeForm = schema.type === "object" && !schema.properties;
  if (freeForm)
    return [
      [named("deep object"), "json"],
      [named("deep JSON text"), "urlencoded"],
      [named("__proto__ key"), "json"],
      [named("self-referencing schema"), "json"],
    ];
  return [];
}

function probesFor(route: BodyRoute, label: string, index: number): Probe[] {
  const probes: Probe[] = [];
  const fields = bodyFields(route.schema);
  for (const [i, field] of fields.entries()) {
    const samples = fc.sample(fc.tuple(hostileValue, fc.constantFrom(...ENCODINGS)), {
      seed: SEED + index * 1000 + i,
      numRuns: VALUES_PER_FIELD,
    });
    for (const [value, encoding] of [...samples, ...targeted(field)]) {
      const base = baseBody(seed, route, label);
      probes.push({
        label,
        field: field.path.join("."),
        value: value.name,
        encoding,
        init: encode(encoding, base, field.path, value),
        mustRefuse: clearlyInvalid(field.schema, value, encoding),
      });
    }
  }
  // The body as a whole: nested past any sane depth, a prototype key at the top, not an object at all.
  const base = JSON.stringify(baseBody(seed, route, label));
  const whole = (name: string, body: string, type = "application/json"): Probe => ({
    label,
    field: "(body)",
    value: name,
    encoding: type,
    init: { headers: { "content-type": type }, body },
    mustRefuse: true,
  });
  probes.push(
    whole(
      "deep nesting",
      `${base.slice(0, -1)}${base === "{}" ? "" : ","}"deep":${"[".repeat(100_000)}${"]".repeat(100_000)}}`,
    ),
    whole("__proto__ at the top", `{"__proto__":{"polluted":true}${base === "{}" ? "}" : `,${base.slice(1)}`}`),
    whole("array body", `[${base}]`),
    whole("deep dotted name", `${"a.".repeat(50_000)}a=1`, "application/x-www-form-urlencoded"),
  );
  return probes;
}

describe("hostile request bodies: never a 5xx, invalid values refused, nothing stored", () => {
  for (const [index, route] of ROUTES.entries()) {
    const label = `${route.method.toUpperCase()} ${route.path}`;
    it(label, async () => {
      const failures: string[] = [];
      for (const probe of probesFor(route, label, index)) {
        const failure = await send(route, probe);
        if (failure) failures.push(failure);
      }
      expect(failures).toEqual([]);
    });
  }
});
