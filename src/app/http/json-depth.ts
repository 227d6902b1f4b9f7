/**
 * Request bodies may nest objects and arrays at most MAX_JSON_DEPTH levels deep, the body itself
 * being level 1. Deeper values overflow the stack of recursive code further on (zod, the
 * Temporal payload converter, JSON.stringify), so the edge refuses them with the path of the
 * first value too deep. The JSON routes check it in parseJson (src/app/http/route.ts); the
 * signed raw-body routes in their own parsers (src/slack/envelope.ts, src/github/relevance.ts).
 * Pure and iterative: no input can overflow this check itself.
 */
import { errors } from '../errors';

export const MAX_JSON_DEPTH = 64;
export const TOO_DEEP_MESSAGE = `Nested deeper than ${MAX_JSON_DEPTH} levels (the body is level 1).`;

interface Node {
  value: unknown;
  key?: string | number;
  parent?: Node;
  depth: number;
}

/** The path of the first object or array nested deeper than `max` levels in `value`, or undefined. */
export function pathDeeperThan(value: unknown, max = MAX_JSON_DEPTH): (string | number)[] | undefined {
  const stack: Node[] = [{ value, depth: 1 }];
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (node.value === null || typeof node.value !== 'object') continue;
    if (node.depth > max) return pathOf(node);
    const children: [string | number, unknown][] = Array.isArray(node.value)
      ? node.value.map((child, index) => [index, child])
      : Object.entries(node.value);
    for (let i = children.length - 1; i >= 0; i--) {
      const [key, child] = children[i]!;
      if (child !== null && typeof child === 'object') stack.push({ value: child, key, parent: node, depth: node.depth + 1 });
    }
  }
  return undefined;
}

function pathOf(node: Node): (string | number)[] {
  const path: (string | number)[] = [];
  for (let at: Node | undefined = node; at?.parent; at = at.parent) path.push(at.key!);
  return path.reverse();
}

/** `value` itself, or a 400 invalid_request naming the first path nested deeper than MAX_JSON_DEPTH. */
export function refuseTooDeep<T>(value: T): T {
  const path = pathDeeperThan(value);
  if (path) throw errors.invalidRequest([{ message: TOO_DEEP_MESSAGE, path }]);
  return value;
}
