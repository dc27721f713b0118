/** A small typed event emitter: listeners per event name, called in the order they were added. */
export class Emitter<Events> {
  private readonly listeners = new Map<keyof Events, Set<(value: never) => void>>();

  /** Adds a listener; returns a function that removes it. */
  on<K extends keyof Events>(name: K, listener: (value: Events[K]) => void): () => void {
    let set = this.listeners.get(name);
    if (!set) {
      set = new Set();
      this.listeners.set(name, set);
    }
    set.add(listener as (value: never) => void);
    return () => set.delete(listener as (value: never) => void);
  }

  /** Calls every listener of `name`; one that throws does not keep the others from hearing. */
  emit<K extends keyof Events>(name: K, value: Events[K]): void {
    const set = this.listeners.get(name);
    if (!set) return;
    for (const listener of [...set]) {
      try {
        (listener as (value: Events[K]) => void)(value);
      } catch (error) {
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }
}
