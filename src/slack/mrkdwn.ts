/**
 * A runtime's Markdown as Slack mrkdwn that cannot mention anyone. Slack acts on `<…>`
 * (`<!channel>`, `<@U…>`, `<#C…>`, `<url|label>`), so every piece of the runtime's text is
 * escaped (escapeMrkdwn) and the only `<` in the output opens a link written as a Markdown link
 * to an http, https or mailto URL. The Markdown is parsed by remark (CommonMark and GFM); the
 * output keeps Slack's formatting: bold, italics, strike, headings as bold, lists with •, block
 * quotes and code.
 */
import type { Definition, Html, Link, List, ListItem, Nodes, PhrasingContent, RootContent, Table } from 'mdast';
import remarkGfm from 'remark-gfm';
import remarkParse from 'remark-parse';
import { unified } from 'unified';
import { escapeMrkdwn } from './texts';

const parser = unified().use(remarkParse).use(remarkGfm).freeze();

/** Slack reads `*a*b` inside a word as plain text: a zero-width space on each side keeps the marker. */
const ZWSP = '\u200b';

/** The only URL schemes that become links; any other shows as text. */
const LINK_PROTOCOLS = new Set(['http:', 'https:', 'mailto:']);

/** What rendering one document needs besides the node: its source, and its link definitions. */
interface Document {
  source: string;
  definitions: Map<string, Definition>;
}

/**
 * Markdown as Slack mrkdwn. A document too deeply nested to render (a stack overflow) is shown
 * as escaped text rather than not at all.
 */
export function markdownToMrkdwn(markdown: string): string {
  try {
    const tree = parser.parse(markdown);
    const doc: Document = { source: markdown, definitions: new Map() };
    collectDefinitions(tree, doc.definitions);
    return flow(tree.children, doc).trim();
  } catch {
    return escapeMrkdwn(markdown).trim();
  }
}

/**
 * Where a Markdown link may point, as it goes between `<` and `|` in mrkdwn: an absolute http,
 * https or mailto URL, normalized by the URL parser (which percent-encodes spaces, `<`, `>`, `"`
 * and non-ASCII, and leaves existing `%XX` alone), with `|` and whatever else could end or split
 * the link percent-encoded too, and `&` escaped. Undefined for any other URL.
 */
export function linkTarget(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined;
  }
  if (!LINK_PROTOCOLS.has(parsed.protocol)) return undefined;
  const href = parsed.href.replace(/[\s<>|"`]/g, encodeURIComponent);
  return escapeMrkdwn(href);
}

function collectDefinitions(node: Nodes, into: Map<string, Definition>): void {
  if (node.type === 'definition' && !into.has(node.identifier)) into.set(node.identifier, node);
  if ('children' in node) for (const child of node.children) collectDefinitions(child, into);
}

/** Block content, one block after another with a blank line between. */
function flow(nodes: readonly RootContent[], doc: Document, separator = '\n\n'): string {
  return nodes
    .map((node) => block(node, doc))
    .filter((text) => text !== '')
    .join(separator);
}

function block(node: RootContent, doc: Document): string {
  switch (node.type) {
    case 'paragraph':
      return phrasing(node.children, doc);
    case 'heading': {
      const text = phrasing(node.children, doc);
      return text === '' ? '' : `*${text}*`;
    }
    case 'thematicBreak':
      return '***';
    case 'blockquote':
      return quote(flow(node.children, doc));
    case 'list':
      return listNode(node, doc);
    case 'code':
      // Slack shows an entity inside code as the character, so code is escaped like text.
      return `\`\`\`\n${escapeMrkdwn(node.value)}\n\`\`\``;
    case 'definition':
      return '';
    case 'footnoteDefinition':
      return `[^${escapeMrkdwn(node.label ?? node.identifier)}]: ${flow(node.children, doc, '\n')}`;
    case 'table':
      return table(node, doc);
    default:
      return inline(node, doc);
  }
}

/** Each line of the quoted blocks behind `> `, as Slack quotes. */
function quote(text: string): string {
  return text
    .split('\n\n')
    .filter((part) => part.trim() !== '')
    .map((part) =>
      part
        .split('\n')
        .map((line) => `> ${line}`)
        .join('\n'),
    )
    .join('\n\n');
}

function listNode(node: List, doc: Document): string {
  const start = node.start ?? 1;
  const items = node.children.map((item, index) => listItem(item, node.ordered ? `${start + index}.` : '•', doc));
  return items.join(node.spread ? '\n\n' : '\n');
}

/** The marker, then the item's blocks indented to the next multiple of four columns. */
function listItem(item: ListItem, marker: string, doc: Document): string {
  const width = Math.ceil((marker.length + 1) / 4) * 4;
  const task = item.checked === true ? '[x] ' : item.checked === false ? '[ ] ' : '';
  const lines = `${task}${flow(item.children, doc, item.spread ? '\n\n' : '\n')}`.split('\n');
  return lines.map((line, index) => (index === 0 ? marker.padEnd(width) : line === '' ? '' : ' '.repeat(width)) + line).join('\n');
}

function table(node: Table, doc: Document): string {
  const rows = node.children.map((row) => `| ${row.children.map((cell) => phrasing(cell.children, doc)).join(' | ')} |`);
  const columns = node.children[0]?.children.length ?? 0;
  rows.splice(1, 0, `| ${Array.from({ length: columns }, () => '---').join(' | ')} |`);
  return rows.join('\n');
}

function phrasing(nodes: readonly PhrasingContent[], doc: Document): string {
  return nodes.map((node) => inline(node, doc)).join('');
}

/** Emphasis in Slack's markers; nothing at all when there is nothing inside. */
function wrap(marker: string, text: string): string {
  return text === '' ? '' : `${ZWSP}${marker}${text}${marker}${ZWSP}`;
}

function inline(node: RootContent, doc: Document): string {
  switch (node.type) {
    case 'text':
      return escapeMrkdwn(node.value);
    case 'emphasis':
      return wrap('_', phrasing(node.children, doc));
    case 'strong':
      return wrap('*', phrasing(node.children, doc));
    case 'delete':
      return wrap('~', phrasing(node.children, doc));
    case 'inlineCode':
      return `\`${escapeMrkdwn(node.value)}\``;
    case 'break':
      return '\n';
    case 'html':
      return htmlNode(node);
    case 'link':
      return link(node, doc);
    case 'linkReference': {
      const definition = doc.definitions.get(node.identifier);
      return definition
        ? linkOrText(definition.url, plainText(node.children, doc), phrasing(node.children, doc))
        : phrasing(node.children, doc);
    }
    case 'image':
      return linkOrText(node.url, node.alt ?? '', escapeMrkdwn(node.alt ?? ''));
    case 'imageReference': {
      const definition = doc.definitions.get(node.identifier);
      const alt = escapeMrkdwn(node.alt ?? '');
      return definition ? linkOrText(definition.url, node.alt ?? '', alt) : alt;
    }
    case 'footnoteReference':
      return `[^${escapeMrkdwn(node.label ?? node.identifier)}]`;
    default:
      return other(node, doc);
  }
}

/** A node of a kind not rendered above: its content, escaped. */
function other(node: RootContent, doc: Document): string {
  if ('children' in node) return flow(node.children as RootContent[], doc, '\n');
  if ('value' in node) return escapeMrkdwn(String(node.value));
  return '';
}

/** Raw HTML shows as the text it is; a comment, as before, not at all. */
function htmlNode(node: Html): string {
  return /^<!--[\s\S]*-->$/.test(node.value.trim()) ? '' : escapeMrkdwn(node.value);
}

/**
 * A Markdown link. An autolink written `<url|label>` is Slack's link syntax, not a Markdown link
 * (its URL would hold the `|`): it shows as the text it is.
 */
function link(node: Link, doc: Document): string {
  const written = slackSyntax(node, doc);
  if (written !== undefined) return escapeMrkdwn(written);
  return linkOrText(node.url, plainText(node.children, doc), phrasing(node.children, doc));
}

/** The source of an autolink written as Slack's `<url|label>`; undefined for any other link. */
function slackSyntax(node: Link, doc: Document): string | undefined {
  const start = node.position?.start.offset;
  const end = node.position?.end.offset;
  if (start === undefined || end === undefined || doc.source[start] !== '<' || !node.url.includes('|')) return undefined;
  return doc.source.slice(start, end);
}

/**
 * `<target|label>`, or `<target>` when the label is empty or is the URL itself; for a URL that
 * may not be a link, `fallback` (the label as formatted text), or else the URL as text.
 */
function linkOrText(url: string, label: string, fallback: string): string {
  const target = linkTarget(url);
  if (target === undefined) return fallback !== '' ? fallback : escapeMrkdwn(url);
  const text = label.replace(/\s+/g, ' ').trim();
  return text === '' || text === url || escapeMrkdwn(text) === target ? `<${target}>` : `<${target}|${escapeMrkdwn(text)}>`;
}

/** A link's label as plain text: Slack does not format inside one. */
function plainText(nodes: readonly Nodes[], doc: Document): string {
  return nodes
    .map((node) => {
      if (node.type === 'image' || node.type === 'imageReference') return node.alt ?? '';
      if (node.type === 'break') return ' ';
      if (node.type === 'link') return slackSyntax(node, doc) ?? plainText(node.children, doc);
      if ('children' in node) return plainText(node.children, doc);
      return 'value' in node ? node.value : '';
    })
    .join('');
}
