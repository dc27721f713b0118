/**
 * Who the player is to the others: the name (and, with an account, the
 * avatar) it plays under, shown in the panel and changed there. The name
 * is kept in localStorage and given in every join; the avatar is the
 * account's (PATCH /api/me). A change takes effect with a new session.
 */
const NAME_KEY = "grove.name";
// Where the name lives when storage is off (private modes): for the page's life.
let unsaved = "";

/** Avatars to pick from: faces and animals that read well at the board's size. */
export const avatarChoices = ["😀", "😎", "🤠", "🥳", "🦊", "🐼", "🐸", "🐙", "🦉", "🐝", "🦄", "🐢"];

export interface Choice {
  name: string;
  /** Undefined when it stays as it is. */
  avatar: string | undefined;
}

export class YouPanel {
  private readonly avatar = element("you-avatar");
  private readonly name = element("you-name");
  private readonly form = element("you-form") as HTMLFormElement;
  private readonly input = element("you-name-input") as HTMLInputElement;
  private readonly choices = element("you-avatars");
  private readonly edit = element("you-edit") as HTMLButtonElement;
  private picked: string | undefined;

  constructor(
    private readonly onChoose: (choice: Choice) => void,
    canChangeAvatar: () => boolean,
  ) {
    for (const emoji of avatarChoices) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "emoji";
      button.textContent = emoji;
      button.setAttribute("aria-label", `play as ${emoji}`);
      button.addEventListener("click", () => this.pick(emoji));
      this.choices.append(button);
    }
    this.edit.addEventListener("click", () => {
      this.input.value = this.name.textContent ?? "";
      this.choices.hidden = !canChangeAvatar();
      this.pick(undefined);
      this.form.hidden = false;
      this.edit.hidden = true;
      this.input.focus();
    });
    element("you-cancel").addEventListener("click", () => this.close());
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      const choice = { name: this.input.value.trim(), avatar: this.picked };
      this.close();
      this.onChoose(choice);
    });
  }

  /** Shows who the server says the player is. */
  show(name: string, avatar: string): void {
    if (this.name.textContent !== name) this.name.textContent = name;
    if (this.avatar.textContent !== avatar) this.avatar.textContent = avatar;
  }

  private pick(emoji: string | undefined): void {
    this.picked = emoji;
    for (const button of this.choices.querySelectorAll("button")) {
      button.classList.toggle("picked", button.textContent === emoji);
    }
  }

  private close(): void {
    this.form.hidden = true;
    this.edit.hidden = false;
  }
}

/** The name this browser plays under, "" for one the server makes up. */
export function savedName(): string {
  try {
    return localStorage.getItem(NAME_KEY) ?? unsaved;
  } catch {
    return unsaved;
  }
}

export function saveName(name: string): void {
  unsaved = name;
  try {
    if (name) localStorage.setItem(NAME_KEY, name);
    else localStorage.removeItem(NAME_KEY);
  } catch {
    // Nowhere to keep it: it lasts as long as the page.
  }
}

function element(id: string): HTMLElement {
  const found = document.getElementById(id);
  if (!found) throw new Error(`index.html lacks #${id}`);
  return found;
}
