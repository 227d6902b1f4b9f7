/**
 * Notices between the features of one API process: one feature says something happened, and the
 * parts of other features that keep state about it hear it at once, in memory. A topic is defined
 * once, in the contract of the feature that says it, with its payload's type. The composition
 * root (src/main/api.ts) makes one board per API and hands it to every feature, so nothing is
 * looked up at request time and nothing is shared between two APIs in one process.
 */

export interface Topic<T> {
  readonly name: string;
  /** Never set: carries the payload's type. */
  readonly payload?: T;
}

export function topic<T>(name: string): Topic<T> {
  return { name };
}

export interface Notices {
  publish<T>(topic: Topic<T>, payload: T): void;
  subscribe<T>(topic: Topic<T>, listener: (payload: T) => void): void;
}

export function createNotices(): Notices {
  const listeners = new Map<string, ((payload: unknown) => void)[]>();
  return {
    publish: (topic, payload) => {
      for (const listener of listeners.get(topic.name) ?? []) listener(payload);
    },
    subscribe: (topic, listener) => {
      listeners.set(topic.name, [...(listeners.get(topic.name) ?? []), listener as (payload: unknown) => void]);
    },
  };
}
