// Recording a voice message for the visitor route's `audio` input, with the browser's own
// MediaRecorder. The microphone is asked for only when the visitor presses the button.
import { button } from "./dom";
import { icon } from "./icons";

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
        base64Of(new Blob(this.chunks, { type })).then(
          (audio) => resolve({ audio, audio_mime_type: type.slice(0, 100) }),
          reject,
        );
      });
      recorder.stop();
    });
  }
}

export interface VoiceButtonHooks {
  /** Whether a recording may start now (not while an answer streams; a password bot asks first). */
  mayStart(): boolean;
  onRecorded(recording: Recording): Promise<void>;
  onError(message: string): void;
  /** Tells screen-reader users what the button did (the page's polite live region). */
  announce(text: string): void;
}

/** The microphone toggle: press to record, press again (or wait a minute) to send. Starts hidden. */
export function voiceButton(hooks: VoiceButtonHooks): HTMLButtonElement {
  const recorder = new VoiceRecorder();
  let timer: ReturnType<typeof setTimeout> | undefined;
  // Set while the browser asks for the microphone, so a second press does not open it twice.
  let starting = false;
  const mic = button("", () => void toggle(), {
    class: "mic",
    "aria-label": "Record a voice message",
    "aria-pressed": "false",
    hidden: "",
  });
  mic.append(icon("mic"));

  const show = (on: boolean): void => {
    mic.setAttribute("aria-pressed", String(on));
    mic.setAttribute("aria-label", on ? "Stop recording and send" : "Record a voice message");
    mic.replaceChildren(icon(on ? "stop" : "mic"));
    hooks.announce(on ? "Recording. Press the button again to send." : "");
  };

  async function toggle(): Promise<void> {
    if (starting) return;
    if (!recorder.recording) {
      if (!hooks.mayStart()) return;
      starting = true;
      try {
        await recorder.start();
      } catch {
        return hooks.onError("The microphone could not be used. Check the browser's permission and try again.");
      } finally {
        starting = false;
      }
      show(true);
      // A forgotten recording still ends, well under the server's audio limit.
      timer = setTimeout(() => void toggle(), MAX_RECORDING_MS);
      return;
    }
    clearTimeout(timer);
    show(false);
    let recording: Recording;
    try {
      recording = await recorder.stop();
    } catch {
      return hooks.onError("The recording could not be read. Please try again.");
    }
    if (recording.audio === "") return hooks.onError("Nothing was recorded. Please try again.");
    await hooks.onRecorded(recording);
  }
  return mic;
}
