import { describe, expect, it } from "vitest";
import { bearer, call, seedOrg } from "../helpers";
import { createPipeline } from "../pipelines/fixtures";
import { DEFAULT_INDEXING_CONFIG, sdkNewKnowledgeBase, sdkQuery, type Body } from "./sdk-wire";

/**
 * The SDK's async twins (`arun`, `abulk_run`, ...) send files through `aiohttp.FormData`
 * (`AsyncRequestClient.arequest`): every plain value as a part of its own with
 * `Content-Type: text/plain; charset=utf-8` (dicts as JSON, everything else through `str()`, so
 * `True`), and each file with `filename=` the path as opened, which aiohttp percent-encodes
 * (`%2Ftmp%2F...`), or `file` for bytes. The bodies below are byte for byte what aiohttp 3.8.4
 * sent for `Pipeline.arun` (captured from the SDK's own request code).
 */

const BOUNDARY = "353f07cc6e8c41adb441b4ce9023b064";
const part = (headers: string[], value: string) => `--${BOUNDARY}\r\n${headers.join("\r\n")}\r\n\r\n${value}\r\n`;
const textPart = (name: string, value: string) =>
  part(["Content-Type: text/plain; charset=utf-8", `Content-Disposition: form-data; name="${name}"`], value);
const filePart = (name: string, filename: string, type: string, value: string) =>
  part([`Content-Type: ${type}`, `Content-Disposition: form-data; name="${name}"; filename="${filename}"`], value);
const aiohttpForm = (...parts: string[]) => `${parts.join("")}--${BOUNDARY}--\r\n`;

const FILE_PIPELINE = {
  nodes: [
    { id: "doc", type: "input", config: { name: "doc", type: "file" } },
    { id: "label", type: "input", config: { name: "label", type: "text" } },
    { id: "file_back", type: "output", config: { name: "file_back", value: "{{doc}}" } },
    { id: "tag", type: "output", config: { name: "tag", value: "{{label}}" } },
  ],
  edges: [
    { source: "doc", target: "file_back" },
    { source: "label", target: "tag" },
  ],
};

function post(key: string, path: string, body: string) {
  return call(`/v1${path}`, {
    method: "POST",
    headers: {
      ...bearer(key),
      "content-type": `multipart/form-data; boundary=${BOUNDARY}`,
      "user-agent": "Python/3.11 aiohttp/3.8.4",
    },
    body,
  });
}

describe("the SDK's async multipart form (aiohttp) against Loom", () => {
  it("arun with a file opened from a path: the percent-encoded name is decoded", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const id = await createPipeline(key, FILE_PIPELINE);
    const body = aiohttpForm(
      textPart("inputs", '{"label": "mine"}'),
      filePart("doc", "%2Ftmp%2Fi12%2Fcap%2Fnotes.txt", "text/plain", "hello file"),
    );
    const res = await post(key, `/pipeline/${id}/run`, body);
    const answer = (await res.json()) as Body;
    expect(res.status, JSON.stringify(answer)).toBe(200);
    const outputs = answer.outputs as Body;
    expect(outputs.tag).toBe("mine");
    expect(outputs.file_back).toMatchObject({
      type: "file",
      raw_bytes: btoa("hello file"),
      metadata: { name: "/tmp/i12/cap/notes.txt", mime_type: "text/plain" },
    });
  });

  it("arun(stream=True) with bytes: stream arrives as the text True and the file as 'file'", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const id = await createPipeline(key, FILE_PIPELINE);
    const body = aiohttpForm(
      textPart("inputs", '{"label": "mine"}'),
      textPart("stream", "True"),
      filePart("doc", "file", "application/octet-stream", "bytes in memory"),
    );
    const res = await post(key, `/pipeline/${id}/run`, body);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const events = (await res.text())
      .split("\n")
      .filter((line) => line.startsWith("data: "))
      .map((line) => JSON.parse(line.slice(6)) as Body);
    const results = events.filter((e) => e.type === "result");
    expect(results.find((e) => e.output_name === "tag")?.output_value).toBe("mine");
    expect(results.find((e) => e.output_name === "file_back")?.output_value).toMatchObject({
      raw_bytes: btoa("bytes in memory"),
      metadata: { name: "file", mime_type: "application/octet-stream" },
    });
  });

  it("aindex_document: the file form through aiohttp (file_data as the text True, Python's JSON spacing, an encoded path) indexes the file", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const kb = await sdkNewKnowledgeBase(key);
    const pythonJson = (value: unknown) =>
      JSON.stringify(value).replaceAll('","', '", "').replaceAll('":', '": ').replaceAll(',"', ', "');
    const body = aiohttpForm(
      textPart("file_data", "True"),
      textPart("file_data.metadata.name", "refunds.txt"),
      textPart("file_data.metadata.mime_type", "text/plain"),
      textPart("config", pythonJson(DEFAULT_INDEXING_CONFIG)),
      filePart(
        "file_data.file",
        "%2Fhome%2Fme%2Frefunds.txt",
        "text/plain",
        "Refunds are paid within 14 days of the request.",
      ),
    );
    const res = await post(key, `/knowledge-base/${kb}/index`, body);
    const answer = (await res.json()) as Body;
    expect(res.status, JSON.stringify(answer)).toBe(200);
    expect(answer).toMatchObject({ status: "success", document_ids: [expect.any(String)] });
    const found = await sdkQuery(key, kb, ["how long do refunds take?"]);
    expect(JSON.stringify(found.body)).toContain("14 days");
  });
});
