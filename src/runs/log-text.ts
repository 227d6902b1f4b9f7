/**
 * A runtime's own text (a terminal event's error, up to TERMINAL_ERROR_MAX_LENGTH) is logged at
 * most LOGGED_TEXT_MAX_LENGTH characters long, then an ellipsis; what is stored and returned keeps
 * it whole. Pure, so workflow code can use it.
 */
export const LOGGED_TEXT_MAX_LENGTH = 200;

/** `text` cut to LOGGED_TEXT_MAX_LENGTH characters plus "…" when longer; null and undefined pass through. */
export function forLog<T extends string | null | undefined>(text: T): T | string {
  if (typeof text !== 'string' || text.length <= LOGGED_TEXT_MAX_LENGTH) return text;
  // Never end on half a surrogate pair.
  const end = /[\uD800-\uDBFF]/.test(text[LOGGED_TEXT_MAX_LENGTH - 1]!) ? LOGGED_TEXT_MAX_LENGTH - 1 : LOGGED_TEXT_MAX_LENGTH;
  return `${text.slice(0, end)}…`;
}
