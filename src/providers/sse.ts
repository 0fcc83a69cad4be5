import type { IdleDeadline } from "./http";

export interface SseEvent {
  event: string;
  data: string;
}

/**
 * Reads a `text/event-stream` body into events. Each chunk restarts the idle deadline, so a stream
 * that goes silent is cut off while a long but live one is not.
 */
export async function* readSse(body: ReadableStream<Uint8Array>, deadline?: IdleDeadline): AsyncGenerator<SseEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let event = "";
  let data: string[] = [];
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      deadline?.touch();
      buffer += decoder.decode(value, { stream: true });
      let newline: number;
      while ((newline = buffer.search(/\r\n|\n|\r/)) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
        if (line === "") {
          if (data.length > 0) yield { event: event || "message", data: data.join("\n") };
          event = "";
          data = [];
        } else if (line.startsWith(":")) {
        } else {
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
          if (field === "event") event = value;
          else if (field === "data") data.push(value);
        }
      }
    }
    buffer += decoder.decode();
    if (buffer.length > 0 && buffer.startsWith("data:")) data.push(buffer.slice(5).replace(/^ /, ""));
    if (data.length > 0) yield { event: event || "message", data: data.join("\n") };
  } finally {
    reader.releaseLock();
    deadline?.dispose();
  }
}
