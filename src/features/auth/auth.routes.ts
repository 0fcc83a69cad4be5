import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppBindings } from "../../env";
import { defineRoute } from "../../lib/route";
import { Success } from "../../lib/response-schemas";
import { AccessToken, ApiKeyCreated, ApiKeysResult, CurrentUser, SignupResult } from "../admin/admin.responses";
import { enforceLimit } from "../../middleware/limits";
import { clientIdentity } from "../../middleware/client-identity";
import { ApiKeyCreateBody, ApiKeyParams, LoginBody, SignupBody } from "./auth.schemas";
import { createApiKey, currentUser, listApiKeys, login, revokeApiKey, signup } from "./auth.service";

export function registerAuthRoutes(app: OpenAPIHono<AppBindings>): void {
  const tags = ["Auth"];

  defineRoute(
    app,
    {
      method: "post",
      path: "/auth/signup",
      group: "B",
      auth: "none",
      tags,
      response: SignupResult,
      summary: "Create a user and a new organization it owns",
      body: SignupBody,
      responses: {
        201: "Created",
        403: "Sign-up is switched off",
        409: "Email, username or organization taken",
        429: "Too many sign-ups from this client (Retry-After)",
      },
    },
    async (c, { body }) => {
      // Each sign-up derives a password hash and creates an organization: per client, so nobody mass-creates them.
      await enforceLimit(
        c.env.SIGNUP_LIMITER,
        `signup:${clientIdentity(c)}`,
        "too many sign-ups from your address; wait a minute and try again",
      );
      return c.json(await signup(c.env, body), 201);
    },
  );

  defineRoute(
    app,
    {
      method: "post",
      path: "/auth/login",
      group: "B",
      auth: "none",
      tags,
      response: AccessToken,
      summary: "Exchange a username (or email) and password for an access token (OAuth2 password grant)",
      body: LoginBody,
      responses: { 429: "Too many attempts from this client or for this account (Retry-After)" },
    },
    async (c, { body }) => {
      const client = clientIdentity(c);
      // Per client over every account, known or not: each attempt costs a slow key derivation.
      await enforceLimit(
        c.env.LOGIN_CLIENT_LIMITER,
        `login-client:${client}`,
        "too many login attempts from your address; wait a minute and try again",
      );
      return c.json(await login(c.env, body.username, body.password, client));
    },
  );

  defineRoute(
    app,
    {
      method: "get",
      path: "/auth/me",
      group: "B",
      auth: "bearer",
      tags,
      response: CurrentUser,
      summary: "The signed-in user",
    },
    async (c) => c.json(await currentUser(c.env, c.get("auth"))),
  );

  defineRoute(
    app,
    {
      method: "post",
      path: "/auth/api-keys",
      group: "B",
      auth: "bearer",
      tags,
      response: ApiKeyCreated,
      summary: "Create an API key; the key is shown only in this response",
      body: ApiKeyCreateBody,
      responses: { 201: "Created" },
    },
    async (c, { body }) => c.json(await createApiKey(c.env, c.get("auth"), body.name), 201),
  );

  defineRoute(
    app,
    {
      method: "get",
      path: "/auth/api-keys",
      group: "B",
      auth: "bearer",
      tags,
      response: ApiKeysResult,
      summary: "List your API keys (never their secret)",
    },
    async (c) => c.json({ api_keys: await listApiKeys(c.env, c.get("auth")) }),
  );

  defineRoute(
    app,
    {
      method: "delete",
      path: "/auth/api-keys/:id",
      group: "B",
      auth: "bearer",
      tags,
      response: Success,
      summary: "Revoke an API key at once",
      params: ApiKeyParams,
      responses: { 404: "No such key of yours" },
    },
    async (c, { params }) => {
      await revokeApiKey(c.env, c.get("auth"), params.id);
      return c.json({ status: "success" });
    },
  );
}
