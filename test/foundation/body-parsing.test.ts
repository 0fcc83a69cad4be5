import { describe, expect, it } from "vitest";
import { z } from "@hono/zod-openapi";
import { parseRequestBody } from "../../src/lib/body";
import { zFreeObject, zJsonObject } from "../../src/lib/schema";
import { bearer, call, seedOrg } from "../helpers";

const request = (type: string, body: BodyInit): Request =>
  new Request("http://loom.test/x", { method: "POST", headers: type ? { "content-type": type } : {}, body });

describe("one body parser for JSON, multipart and urlencoded", () => {
  it("nests dotted names, merges JSON-string objects with dotted refinements, and repeats keys into arrays", async () => {
    const fields = new URLSearchParams();
    fields.append("file_data", JSON.stringify({ custom_metadata: { team: "a" } }));
    fields.append("file_data.file.metadata.name", "notes.txt");
    fields.append("queries", "first");
    fields.append("queries", "second");
    const parsed = await parseRequestBody(request("application/x-www-form-urlencoded", fields.toString()));
    expect(parsed).toEqual({
      file_data: { custom_metadata: { team: "a" }, file: { metadata: { name: "notes.txt" } } },
      queries: ["first", "second"],
    });
  });

  it("turns a multipart file part into the same shape as base64 JSON, keeping dotted metadata", async () => {
    const form = new FormData();
    form.append("file_data.file", new File(["hello world"], "hello.txt", { type: "text/plain" }));
    form.append("file_data.file.metadata.path", "/docs/hello.txt");
    const parsed = await parseRequestBody(new Request("http://loom.test/x", { method: "POST", body: form }));
    expect(parsed).toEqual({
      file_data: {
        file: {
          type: "file",
          raw_bytes: btoa("hello world"),
          metadata: { name: "hello.txt", mime_type: "text/plain", size: 11, path: "/docs/hello.txt" },
        },
      },
    });
  });

  it("keeps repeated multipart file parts of one name as a list of files, in order (the SDK's `files` parts)", async () => {
    const form = new FormData();
    for (const name of ["a.txt", "b.txt", "c.txt"])
      form.append("files", new File([name], name, { type: "text/plain" }));
    const parsed = await parseRequestBody(new Request("http://loom.test/x", { method: "POST", body: form }));
    expect((parsed.files as { metadata: { name: string } }[]).map((f) => f.metadata.name)).toEqual([
      "a.txt",
      "b.txt",
      "c.txt",
    ]);
  });

  it("treats a field sent as null as not set, at the top and in declared nested objects; free-form data keeps its nulls", async () => {
    const json = JSON.stringify({ a: null, b: { c: null, d: 1 }, list: [null] });
    expect(await parseRequestBody(request("application/json", json))).toEqual({ b: { c: null, d: 1 }, list: [null] });
    const Body = z.object({
      config: zJsonObject(
        z
          .object({
            chunk_size: z.number().optional(),
            nested: zJsonObject(z.object({ k: z.string().optional() })).optional(),
          })
          .strict(),
      ).optional(),
      inputs: zFreeObject().optional(),
    });
    // As the SDK sends them: a config object, or the same config as a JSON string in a form field.
    expect(Body.parse({ config: { chunk_size: null, nested: { k: null } }, inputs: { x: null } })).toEqual({
      config: { nested: {} },
      inputs: { x: null },
    });
    expect(Body.parse({ config: JSON.stringify({ chunk_size: null, nested: null }) })).toEqual({ config: {} });
    await expect(parseRequestBody(request("application/json", "null"))).rejects.toThrow(
      "request body must be a JSON object",
    );
  });

  it("takes `field=true` beside dotted fields under it as the object's presence, in either order", async () => {
    const form = new FormData();
    form.append("file_data", "true");
    form.append("file_data.metadata.name", "a.txt");
    form.append("file_data.file", new File(["hi"], "a.txt"));
    const parsed = await parseRequestBody(new Request("http://loom.test/x", { method: "POST", body: form }));
    expect(parsed).toEqual({
      file_data: {
        metadata: { name: "a.txt" },
        file: {
          type: "file",
          raw_bytes: btoa("hi"),
          metadata: { name: "a.txt", mime_type: "application/octet-stream", size: 2 },
        },
      },
    });
    expect(await parseRequestBody(request("application/x-www-form-urlencoded", "x.y=1&x=true"))).toEqual({
      x: { y: "1" },
    });
    await expect(parseRequestBody(request("application/x-www-form-urlencoded", "x=false&x.y=1"))).rejects.toThrow(
      "field x is given both as a value and as an object",
    );
  });

  it("treats an empty body as an empty object and rejects prototype keys", async () => {
    expect(await parseRequestBody(request("application/json", ""))).toEqual({});
    expect(await parseRequestBody(request("", ""))).toEqual({});
    await expect(
      parseRequestBody(request("application/x-www-form-urlencoded", "constructor.prototype.x=1")),
    ).rejects.toThrow("invalid field name");
  });

  it("gives the same result through a route in all three encodings", async () => {
    const org = await seedOrg();
    const auth = bearer(org.owner.token);
    const fields = {
      name: "",
      kind: "openai",
      base_url: "https://llm.example/v1",
      "models.chat": "m1",
      settings: JSON.stringify({ region: "eu" }),
    };
    const results = [];
    for (const [i, encode] of [
      (f: Record<string, string>) => ({
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams(f).toString(),
      }),
      (f: Record<string, string>) => {
        const form = new FormData();
        for (const [k, v] of Object.entries(f)) form.append(k, v);
        return { headers: {}, body: form };
      },
      (f: Record<string, string>) => ({
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          name: f.name,
          kind: f.kind,
          base_url: f.base_url,
          models: { chat: "m1" },
          settings: { region: "eu" },
        }),
      }),
    ].entries()) {
      const encoded = encode({ ...fields, name: `enc${i}` });
      const response = await call("/admin/connections/create", {
        method: "POST",
        headers: { ...encoded.headers, ...auth },
        body: encoded.body,
      });
      expect(response.status).toBe(200);
      const { connection } = (await response.json()) as { connection: Record<string, unknown> };
      results.push({
        kind: connection.kind,
        baseUrl: connection.baseUrl,
        models: connection.models,
        settings: connection.settings,
      });
    }
    expect(results[0]).toEqual({
      kind: "openai",
      baseUrl: "https://llm.example/v1",
      models: { chat: "m1" },
      settings: { region: "eu" },
    });
    expect(results[1]).toEqual(results[0]);
    expect(results[2]).toEqual(results[0]);
  });
});
