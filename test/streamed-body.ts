/**
 * A request body that would stream `totalBytes` of "a" in 64 KiB chunks, produced only as the
 * reader pulls them, and counts what was pulled: a test can tell whether the server stopped
 * reading early or read the whole body.
 */
export function countingBody(totalBytes: number): { stream: ReadableStream<Uint8Array>; pulled: () => number } {
  const chunk = new Uint8Array(64 * 1024).fill(97);
  let pulled = 0;
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (pulled >= totalBytes) return controller.close();
        pulled += chunk.byteLength;
        controller.enqueue(chunk);
      },
    },
    { highWaterMark: 0 },
  );
  return { stream, pulled: () => pulled };
}

export const MiB = 1024 * 1024;
