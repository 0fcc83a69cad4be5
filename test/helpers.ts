import { exports } from "cloudflare:workers";
import { createExecutionContext, env } from "cloudflare:test";
import type { Env } from "../src/env";
import { createApp } from "../src/app";

/** Sends a request through the real Worker entry point. */
export function call(path: string, init: RequestInit = {}): Promise<Response> {
  return exports.default.fetch(new Request(`http://loom.test${path}`, init));
}

const appWithOverrides = createApp();

/**
 * Sends a request through the same app with some bindings or variables replaced, as another
 * deployment's configuration would (a tight rate limit, a trusted client-address header).
 */
export async function callWith(overrides: Partial<Env>, path: string, init: RequestInit = {}): Promise<Response> {
  return appWithOverrides.fetch(
    new Request(`http://loom.test${path}`, init),
    { ...env, ...overrides },
    createExecutionContext(),
  );
}

let counter = 0;
function unique(prefix: string): string {
  counter += 1;
  return `${prefix}${Date.now().toString(36)}${counter}${Math.random().toString(36).slice(2, 8)}`;
}

export interface Member {
  userId: string;
  email: string;
  username: string;
  password: string;
  role: string;
  token: string;
  apiKey: string;
}

export interface Org {
  orgId: string;
  name: string;
  owner: Member;
  /** Adds a user with this role to the organization (through the admin API) and signs them in. */
  addMember(role: "admin" | "member" | "viewer"): Promise<Member>;
}

export function json(body: unknown, headers: Record<string, string> = {}): RequestInit {
  return { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) };
}

export function form(
  fields: Record<string, string>,
  headers: Record<string, string> = {},
  method = "POST",
): RequestInit {
  return {
    method,
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(fields).toString(),
  };
}

export const bearer = (credential: string): Record<string, string> => ({ authorization: `Bearer ${credential}` });

async function expectOk(response: Response, what: string): Promise<Record<string, unknown>> {
  const body = (await response.json()) as Record<string, unknown>;
  if (!response.ok) throw new Error(`${what} failed: ${response.status} ${JSON.stringify(body)}`);
  return body;
}

async function withApiKey(token: string): Promise<{ token: string; apiKey: string }> {
  const key = await expectOk(await call("/auth/api-keys", json({ name: "test" }, bearer(token))), "api key");
  return { token, apiKey: String(key.key) };
}

async function signIn(username: string, password: string): Promise<{ token: string; apiKey: string }> {
  const login = await expectOk(await call("/auth/login", form({ username, password })), "login");
  return withApiKey(String(login.access_token));
}

/**
 * Seeds a fresh organization with its owner (signed in, with an API key) through the public
 * API, so every test owns its data and no test depends on another. The owner's token is the one
 * sign-up answers with: a login on top cost a second PBKDF2 derivation (100,000 rounds, kept as
 * production's) for each of the ~400 organizations the suites seed, and the login route has its
 * own tests. Members added with addMember do log in (the admin API answers no token).
 */
export async function seedOrg(): Promise<Org> {
  const username = unique("owner");
  const password = "correct horse battery";
  const email = `${username}@example.com`;
  const name = unique("org");
  const signup = await expectOk(
    await call("/auth/signup", json({ email, password, username, organization: name })),
    "signup",
  );
  const user = signup.user as Record<string, string>;
  const owner: Member = {
    userId: user._id,
    email,
    username,
    password,
    role: "owner",
    ...(await withApiKey(String(signup.access_token))),
  };
  return {
    orgId: user.orgId,
    name,
    owner,
    async addMember(role) {
      const memberName = unique(role);
      const memberEmail = `${memberName}@example.com`;
      const added = await expectOk(
        await call(
          "/admin/users/add",
          form({ email: memberEmail, username: memberName, password, role }, bearer(owner.token)),
        ),
        "add member",
      );
      const addedUser = added.user as Record<string, string>;
      return {
        userId: addedUser._id,
        email: memberEmail,
        username: memberName,
        password,
        role,
        ...(await signIn(memberName, password)),
      };
    },
  };
}
