// Recording a voice message for the visitor route's `audio` input, with the browser's own
// MediaRecorder. The microphone is asked for only when the visitor presses the button.

/** The server takes at most 10 MiB of audio; a minute of Opus is far below that. */
export const MAX_RECORDING_MS = 60_000;

export interface Recording {
  audio: string;
  audio_mime_type: string;
}

/** Whether this page can record at all (MediaRecorder, and a secure context for the microphone). */
export function canRecord(): boolean {
  return typeof MediaRecorder !== "undefined" && typeof navigator.mediaDevices?.getUserMedia === "function";
}

function base64Of(blob: Blob): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).replace(/^data:[^,]*,/, ""));
    reader.onerror = () => reject(reader.error ?? new Error("could not read the recording"));
    reader.readAsDataURL(blob);
  });
}

export class VoiceRecorder {
  private recorder: MediaRecorder | null = null;
  private chunks: Blob[] = [];

  get recording(): boolean {
    return this.recorder !== null;
  }

  async start(): Promise<void> {
    const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    const recorder = new MediaRecorder(stream);
    this.chunks = [];
    recorder.addEventListener("dataavailable", (event) => {
      if (event.data.size > 0) this.chunks.push(event.data);
    });
    recorder.start();
    this.recorder = recorder;
  }

  /** Stops, releases the microphone and answers the recording as base64 with its type. */
  stop(): Promise<Recording> {
    const recorder = this.recorder;
    this.recorder = null;
    if (!recorder) return Promise.reject(new Error("not recording"));
    return new Promise((resolve, reject) => {
      recorder.addEventListener("stop", () => {
        for (const track of recorder.stream.getTracks()) track.stop();
        const type = recorder.mimeType || "audio/webm";
        base64Of(new Blob(this.chunks, { type })).then((audio) => resolve({ audio, audio_mime_type: type.slice(0, 100) }), reject);
      });
      recorder.stop();
    });
  }
}
