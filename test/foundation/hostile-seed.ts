import { env } from "cloudflare:test";
import { bearer, call, form, json, seedOrg, type Member, type Org } from "../helpers";
import { createKb, fileData, indexText } from "../knowledge-bases/kb-fixtures";
import { createPipeline, SMALLEST } from "../pipelines/fixtures";

/** The records the body sweep aims its valid fields at, so hostile values get past lookups into services. */
export interface SweepSeed {
  org: Org;
  member: Member;
  ids: Record<string, string>;
}

async function ok(response: Response, what: string): Promise<Record<string, unknown>> {
  const body = (await response.json()) as Record<string, unknown>;
  if (!response.ok) throw new Error(`${what}: ${response.status} ${JSON.stringify(body)}`);
  return body;
}

export async function seedSweep(): Promise<SweepSeed> {
  const org = await seedOrg();
  const member = await org.addMember("member");
  const key = bearer(org.owner.apiKey);
  const token = bearer(org.owner.token);
  const kb = await createKb(org.owner.apiKey);
  const document = await indexText(org.owner.apiKey, kb, "seed.txt", "Whales are marine mammals.");
  const pipeline = await createPipeline(org.owner.apiKey, SMALLEST);
  const run = await ok(await call(`/v1/pipeline/${pipeline}/run`, json({ inputs: { q: "x" } }, key)), "pipeline run");
  const transformation = await ok(
    await call(
      "/v1/transformation",
      json(
        {
          name: "sweep-t",
          function_name: "double",
          language: "javascript",
          function: "function double({ x }) { return { y: x * 2 }; }",
        },
        key,
      ),
    ),
    "transformation",
  );
  const chatbot = await ok(
    await call("/v1/chatbot", json({ name: "sweep-bot", system_prompt: "Be brief.", knowledge_base_ids: [kb] }, key)),
    "chatbot",
  );
  const chatbotId = String(chatbot.id);
  const answer = await ok(await call(`/v1/chatbot/${chatbotId}/run`, json({ text: "whales?" }, key)), "chatbot run");
  await ok(await call("/chatbots/deploy", form({ chatbot_id: chatbotId }, token)), "deploy");
  const visitor = await ok(await call(`/chatbots/deployed/${chatbotId}/run`, json({ text: "hello" })), "visitor run");
  const agent = await ok(
    await call("/agents/add", json({ name: "sweep-agent", config: { instructions: "be brief" } }, token)),
    "agent",
  );
  const connection = await ok(
    await call(
      "/admin/connections/create",
      form({ name: "sweepconn", kind: "openai", secret: "sk-sweep-secret" }, token),
    ),
    "connection",
  );
  const connectionRecord = (connection.connection ?? connection) as Record<string, unknown>;
  return {
    org,
    member,
    ids: {
      kb,
      document,
      pipeline,
      run: String(run.run_id ?? run.id ?? ""),
      transformation: String(transformation.id),
      chatbot: chatbotId,
      conversation: String(answer.conversation_id),
      message: String(answer.message_id),
      visitorSession: String(visitor.visitor_session),
      visitorConversation: String(visitor.conversation_id),
      visitorMessage: String(visitor.message_id),
      agent: String((agent.agent as Record<string, unknown>)._id),
      connection: String(connectionRecord._id ?? connectionRecord.id ?? ""),
    },
  };
}

let unique = 0;
const next = (prefix: string): string => `${prefix}-${++unique}`;

/** A valid value for a field, by its name and the route it is on; undefined where none is needed. */
export function validValue(seed: SweepSeed, route: string, field: string): unknown {
  const visitorRoute = route.includes("/deployed/") || route === "POST /chatbots/upload";
  const { ids } = seed;
  const byName: Record<string, unknown> = {
    chatbot_id: ids.chatbot,
    conversation_id: visitorRoute ? ids.visitorConversation : ids.conversation,
    message_id: visitorRoute ? ids.visitorMessage : ids.message,
    visitor_session: ids.visitorSession,
    agent_id: ids.agent,
    pipeline_id: ids.pipeline,
    // Making the member the owner would leave the sweep without one: the owner is named instead.
    user_id: route === "PUT /admin/owner/change" ? seed.org.owner.userId : seed.member.userId,
    user_ids: [seed.member.userId],
    run_id: ids.run,
    run_ids: [ids.run],
    connection_id: ids.connection,
    knowledge_base_ids: [ids.kb],
    name: next("sweep"),
    email: `${next("sweep")}@example.com`,
    username: route === "POST /auth/login" ? seed.member.username : next("sweepuser"),
    password: route === "POST /auth/login" ? seed.member.password : "a long password",
    organization: next("sweeporg"),
    kind: "openai",
    role: "member",
    function_name: "double",
    function: "function double({ x }) { return { y: x * 2 }; }",
    language: "javascript",
    text: "hello",
    query: "whales",
    description: "sweep",
    inputs:
      route === "POST /v1/transformation" ? undefined : route.includes("/transformation/") ? { x: 2 } : { q: "x" },
    like: true,
    runs: [{ inputs: { q: "x" } }],
    file: { type: "file", raw_bytes: btoa("hello"), metadata: { name: "a.txt", mime_type: "text/plain", size: 5 } },
    file_data: fileData("a.txt", "text/plain", "hello world").file_data,
  };
  if (route === "POST /v1/pipeline")
    return field === "nodes" ? SMALLEST.nodes : field === "edges" ? SMALLEST.edges : byName[field];
  return byName[field];
}

/** A path with its parameters filled in with seeded records of the right kind. */
export function concretePath(seed: SweepSeed, path: string): string {
  const { ids } = seed;
  const kind = /\/v1\/knowledge-base\//.test(path)
    ? ids.kb
    : /\/v1\/chatbot\//.test(path)
      ? ids.chatbot
      : /\/v1\/pipeline\//.test(path)
        ? ids.pipeline
        : /\/v1\/transformation\//.test(path)
          ? ids.transformation
          : ids.chatbot;
  // The one body route that also needs a query parameter: which published agent to import.
  if (path === "/agents/imported/add") return `${path}?agent_id=${ids.agent}`;
  return path
    .replace("{id}", kind)
    .replace("{chatbot_id}", ids.chatbot)
    .replace("{conversation_id}", ids.conversation)
    .replace("{agent_id}", ids.agent)
    .replace("{pipeline_id}", ids.pipeline)
    .replace("{run_id}", ids.run)
    .replace(/\{[^}]+\}/g, "aaaaaaaaaaaaaaaaaaaaaaaa");
}

/** Counters that requests may bump on the way to a refusal; they are not stored records. */
const COUNTERS = new Set(["chatbot_rate_limits", "chatbot_webhook_replays", "d1_migrations"]);
/** Tables that background work (indexing, pipeline runs) updates after a response: their row count only. */
const ASYNC = new Set(["kb_documents", "pipeline_runs", "knowledge_bases", "chatbot_conversations"]);

let statements: D1PreparedStatement[] | undefined;

/** A fingerprint of everything stored in D1: row counts, and the latest change of each table that records one. */
export async function storedFingerprint(): Promise<string> {
  if (!statements) {
    const tables = await env.DB.prepare(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%'",
    ).all<{ name: string }>();
    statements = [];
    for (const { name } of tables.results) {
      if (COUNTERS.has(name)) continue;
      const columns = await env.DB.prepare(`PRAGMA table_info(${name})`).all<{ name: string }>();
      const changed =
        !ASYNC.has(name) && columns.results.some((c) => c.name === "updated_at") ? ", max(updated_at) AS changed" : "";
      statements.push(env.DB.prepare(`SELECT '${name}' AS t, count(*) AS n${changed} FROM ${name}`));
    }
  }
  const results = await env.DB.batch(statements);
  return JSON.stringify(results.map((r) => r.results[0]));
}
