import type { Announcement, ChatLine, GroveClient, SayResult } from "@grove/client";

/** A line of the page's chat log: a player's, or the operator's announcement. */
export interface ChatEntry {
  kind: "line" | "announcement";
  /** The speaker's entity (0 for an announcement). */
  id: number;
  name: string;
  avatar: string;
  text: string;
  self: boolean;
}

// How many lines the log keeps on the page (the server keeps none for us).
const MAX_LINES = 40;

const refusals: Partial<Record<SayResult, string>> = {
  rate_limited: "Not so fast: one line a second.",
  busy: "The world is busy, try again.",
  interrupted: "That may not have been heard; say it again.",
};

/**
 * Nearby chat on the page: the input (/ to focus it, Enter to say,
 * Escape to leave it; the pad's 💬 on a phone), the short log of what the
 * players in view said and what the operator announced, a mute button on
 * each other player's line, and the list of those muted (click to hear
 * them again). Muting is the client library's: a muted player's lines
 * never reach this page. Bubbles over the speakers are the viewport's.
 */
export class ChatPanel {
  readonly entries: ChatEntry[] = [];
  readonly answers: { text: string; result: SayResult; reason: string }[] = [];
  private readonly log: HTMLElement;
  private readonly form: HTMLFormElement;
  private readonly input: HTMLInputElement;
  private readonly status: HTMLElement;
  private readonly mutedList: HTMLElement;
  private readonly mutedNames = new Map<number, string>();

  constructor(
    private readonly client: GroveClient,
    root: HTMLElement,
    private readonly bubbles: { say(line: ChatLine): void; drop(id: number): void },
    private readonly flash: (text: string) => void,
  ) {
    this.log = root.querySelector("#chat-log") as HTMLElement;
    this.form = root.querySelector("#chat-form") as HTMLFormElement;
    this.input = root.querySelector("#chat-input") as HTMLInputElement;
    this.status = root.querySelector("#chat-status") as HTMLElement;
    this.mutedList = root.querySelector("#chat-muted") as HTMLElement;
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.submit();
    });
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") this.input.blur();
    });
    client.on("chat", (line) => this.heard(line));
    client.on("announcement", (message) => this.announced(message));
  }

  /** Brings the input into view and focuses it (/ on a keyboard, 💬 on the pad). */
  open(): void {
    this.form.scrollIntoView({ block: "nearest" });
    this.input.focus();
  }

  /** Says what the input holds; the server's refusal, if any, shows under it. */
  submit(): void {
    const text = this.input.value;
    if (text.trim() === "") return;
    this.client.say(text).then(
      (answer) => {
        this.answers.push({ text, result: answer.result, reason: answer.reason });
        if (answer.result === "ok") {
          // Said: the keys go back to walking, and "/" opens the chat again;
          // unless the player has begun the next line meanwhile, which stays.
          if (this.input.value === text) {
            this.input.value = "";
            this.input.blur();
          }
          this.show("");
        } else {
          // Kept in the input, to be mended and said again.
          this.show(refusals[answer.result] ?? `Not said: ${answer.reason || answer.result}.`);
        }
      },
      () => this.show("The connection went before that was said."),
    );
  }

  private heard(line: ChatLine): void {
    const name = line.self ? "You" : (line.name ?? "Someone");
    this.add({ kind: "line", id: line.id, name, avatar: line.avatar ?? "💬", text: line.text, self: line.self });
    this.bubbles.say(line);
  }

  private announced(message: Announcement): void {
    this.add({ kind: "announcement", id: 0, name: "Announcement", avatar: "📣", text: message.text, self: false });
    this.flash(`📣 ${message.text}`);
  }

  private add(entry: ChatEntry): void {
    this.entries.push(entry);
    if (this.entries.length > MAX_LINES) this.entries.shift();
    this.log.append(this.row(entry));
    while (this.log.childElementCount > MAX_LINES) this.log.firstElementChild?.remove();
    this.log.scrollTop = this.log.scrollHeight;
  }

  private row(entry: ChatEntry): HTMLElement {
    const row = document.createElement("li");
    row.className = entry.kind === "announcement" ? "announcement" : entry.self ? "self" : "";
    row.dataset.id = String(entry.id);
    const avatar = document.createElement("span");
    avatar.className = "emoji";
    avatar.textContent = entry.avatar;
    const name = document.createElement("span");
    name.className = "name";
    name.textContent = entry.name;
    const text = document.createElement("span");
    text.className = "text";
    text.textContent = entry.text;
    row.append(avatar, name, text);
    if (entry.kind === "line" && !entry.self) {
      const mute = document.createElement("button");
      mute.type = "button";
      mute.className = "mute small";
      mute.textContent = "🔇";
      mute.title = `Mute ${entry.name}: their lines no longer show`;
      mute.setAttribute("aria-label", mute.title);
      mute.addEventListener("click", () => this.mute(entry.id, entry.name));
      row.append(mute);
    }
    return row;
  }

  /** Stops showing a player's lines (those in the log go too). */
  mute(id: number, name: string): void {
    this.client.mute(id);
    this.mutedNames.set(id, name);
    for (const row of [...this.log.querySelectorAll<HTMLElement>(`li[data-id="${id}"]`)]) row.remove();
    this.bubbles.drop(id);
    this.flash(`🔇 ${name} is muted.`);
    this.renderMuted();
  }

  /** Shows a muted player's lines again, from the next one. */
  unmute(id: number): void {
    this.client.unmute(id);
    this.mutedNames.delete(id);
    this.renderMuted();
  }

  private renderMuted(): void {
    this.mutedList.hidden = this.mutedNames.size === 0;
    const buttons = [...this.mutedNames].map(([id, name]) => {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "small";
      button.dataset.id = String(id);
      button.textContent = `${name} ✕`;
      button.title = `Hear ${name} again`;
      button.addEventListener("click", () => this.unmute(id));
      return button;
    });
    this.mutedList.replaceChildren("Muted: ", ...buttons);
  }

  private show(text: string): void {
    this.status.textContent = text;
  }
}
