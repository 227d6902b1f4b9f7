/**
 * The SSRF guard's address decision (docs/mcp.md, "The SSRF guard"). Pure:
 * string in, verdict out, no network. Classification uses ipaddr.js; no hand-rolled parsing.
 *
 * Every address falls in one class:
 *   public     — allowed;
 *   loopback   — 127/8, ::1: allowed only with MCP_ALLOW_PRIVATE_NETWORK or an allowlisted origin;
 *   private    — 10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7, fec0::/10: same;
 *   forbidden  — every other special-purpose range (unspecified, link-local and cloud metadata,
 *                multicast, documentation, benchmarking, reserved…), under both settings.
 * Embedded IPv4 (mapped, compatible, NAT64, 6to4) is judged by the IPv4 address inside.
 * IPv4-translated (::ffff:0:0:0/96) and Teredo (2001::/32) tunnel to addresses the guard cannot
 * see, so both are forbidden outright.
 * Zone ids ("fe80::1%eth0") and anything unparsable fail closed.
 */
import ipaddr from 'ipaddr.js';

type AddressClass = 'public' | 'loopback' | 'private' | 'forbidden';

export interface AddressDecision {
  /** The address as given. */
  address: string;
  class: AddressClass;
  /** The range that decided, e.g. `127.0.0.0/8 (loopback)`. */
  range: string;
}

export interface AddressPolicy {
  /** MCP_ALLOW_PRIVATE_NETWORK, or the request's origin is in MCP_PRIVATE_ALLOWLIST. */
  allowPrivate: boolean;
}

type Range = { cidr: string; label: string; class: Exclude<AddressClass, 'public'> };

/** Checked before the private ranges: cloud metadata endpoints that sit inside them. */
const METADATA: Range[] = [
  { cidr: '100.100.100.200/32', label: 'cloud metadata', class: 'forbidden' },
  { cidr: 'fd00:ec2::254/128', label: 'cloud metadata', class: 'forbidden' },
];

const IPV4_RANGES: Range[] = [
  ...METADATA.slice(0, 1),
  { cidr: '0.0.0.0/8', label: 'this network', class: 'forbidden' },
  { cidr: '10.0.0.0/8', label: 'private', class: 'private' },
  { cidr: '100.64.0.0/10', label: 'shared address space', class: 'private' },
  { cidr: '127.0.0.0/8', label: 'loopback', class: 'loopback' },
  { cidr: '169.254.0.0/16', label: 'link-local and cloud metadata', class: 'forbidden' },
  { cidr: '172.16.0.0/12', label: 'private', class: 'private' },
  { cidr: '192.0.0.0/24', label: 'IETF protocol assignments', class: 'forbidden' },
  { cidr: '192.0.2.0/24', label: 'documentation', class: 'forbidden' },
  { cidr: '192.88.99.0/24', label: '6to4 relay anycast', class: 'forbidden' },
  { cidr: '192.168.0.0/16', label: 'private', class: 'private' },
  { cidr: '198.18.0.0/15', label: 'benchmarking', class: 'forbidden' },
  { cidr: '198.51.100.0/24', label: 'documentation', class: 'forbidden' },
  { cidr: '203.0.113.0/24', label: 'documentation', class: 'forbidden' },
  { cidr: '224.0.0.0/4', label: 'multicast', class: 'forbidden' },
  { cidr: '240.0.0.0/4', label: 'reserved and broadcast', class: 'forbidden' },
];

const IPV6_RANGES: Range[] = [
  ...METADATA.slice(1),
  { cidr: '::/128', label: 'unspecified', class: 'forbidden' },
  { cidr: '::1/128', label: 'loopback', class: 'loopback' },
  { cidr: 'fc00::/7', label: 'unique local', class: 'private' },
  { cidr: 'fe80::/10', label: 'link-local', class: 'forbidden' },
  { cidr: 'fec0::/10', label: 'site-local', class: 'private' },
  { cidr: 'ff00::/8', label: 'multicast', class: 'forbidden' },
  { cidr: '100::/64', label: 'discard-only', class: 'forbidden' },
  { cidr: '2001:db8::/32', label: 'documentation', class: 'forbidden' },
  { cidr: '2001:2::/48', label: 'benchmarking', class: 'forbidden' },
];

const parsedV4 = IPV4_RANGES.map((r) => ({ ...r, net: ipaddr.IPv4.parseCIDR(r.cidr) }));
const parsedV6 = IPV6_RANGES.map((r) => ({ ...r, net: ipaddr.IPv6.parseCIDR(r.cidr) }));

const MAPPED = ipaddr.IPv6.parseCIDR('::ffff:0:0/96');
const COMPATIBLE = ipaddr.IPv6.parseCIDR('::/96');
const NAT64_WELL_KNOWN = ipaddr.IPv6.parseCIDR('64:ff9b::/96');
const NAT64_LOCAL = ipaddr.IPv6.parseCIDR('64:ff9b:1::/48');
const SIX_TO_FOUR = ipaddr.IPv6.parseCIDR('2002::/16');

/** Tunnelling classes refused outright, by ipaddr.js's range name (IPv6 SpecialRanges). */
const TUNNELS: Record<string, string> = {
  rfc6145: '::ffff:0:0:0/96 (IPv4-translated)',
  teredo: '2001::/32 (Teredo)',
};

const SEVERITY: Record<AddressClass, number> = { public: 0, private: 1, loopback: 2, forbidden: 3 };

function classifyV4(address: ipaddr.IPv4): { class: AddressClass; range: string } {
  for (const r of parsedV4) {
    if (address.match(r.net)) return { class: r.class, range: `${r.cidr} (${r.label})` };
  }
  return { class: 'public', range: 'public' };
}

function v4FromBytes(bytes: number[]): ipaddr.IPv4 {
  return new ipaddr.IPv4(bytes.slice(0, 4));
}

/**
 * RFC 6052 §2.2: where the IPv4 address sits for each NAT64 prefix length. Bits 64..71 (the "u"
 * octet) are skipped. The local-use prefix 64:ff9b:1::/48 may be deployed with any of these, so
 * every reading is judged and the worst one wins.
 */
function nat64Readings(bytes: number[]): ipaddr.IPv4[] {
  const at = (indexes: number[]) => new ipaddr.IPv4(indexes.map((i) => bytes[i]!));
  return [
    at([6, 7, 9, 10]), // /48
    at([7, 9, 10, 11]), // /56
    at([9, 10, 11, 12]), // /64
    at([12, 13, 14, 15]), // /96
  ];
}

function worst(decisions: { class: AddressClass; range: string }[]): { class: AddressClass; range: string } {
  return decisions.reduce((a, b) => (SEVERITY[b.class] > SEVERITY[a.class] ? b : a));
}

function embedded(label: string, inner: { class: AddressClass; range: string }): { class: AddressClass; range: string } {
  return { class: inner.class, range: `${label} of ${inner.range}` };
}

function classifyV6(address: ipaddr.IPv6): { class: AddressClass; range: string } {
  const bytes = address.toByteArray();
  // Unspecified and loopback first: they sit inside ::/96 but are not "compatible" addresses.
  for (const r of parsedV6) {
    if (r.cidr.startsWith('::') && address.match(r.net)) return { class: r.class, range: `${r.cidr} (${r.label})` };
  }
  const tunnel = TUNNELS[address.range()];
  if (tunnel) return { class: 'forbidden', range: tunnel };
  if (address.match(MAPPED)) return embedded('IPv4-mapped ::ffff:0:0/96', classifyV4(v4FromBytes(bytes.slice(12))));
  if (address.match(COMPATIBLE)) return embedded('IPv4-compatible ::/96', classifyV4(v4FromBytes(bytes.slice(12))));
  if (address.match(NAT64_WELL_KNOWN)) return embedded('NAT64 64:ff9b::/96', classifyV4(v4FromBytes(bytes.slice(12))));
  if (address.match(NAT64_LOCAL)) {
    return embedded('NAT64 64:ff9b:1::/48', worst(nat64Readings(bytes).map(classifyV4)));
  }
  if (address.match(SIX_TO_FOUR)) return embedded('6to4 2002::/16', classifyV4(v4FromBytes(bytes.slice(2, 6))));
  for (const r of parsedV6) {
    if (address.match(r.net)) return { class: r.class, range: `${r.cidr} (${r.label})` };
  }
  return { class: 'public', range: 'public' };
}

/**
 * Classifies an IP address in any notation ipaddr.js reads: dotted, decimal (2130706433), hex
 * (0x7f000001), octal (0177.0.0.1), short (127.1), IPv6 with or without brackets, embedded IPv4.
 * Not an IP address at all → forbidden (the caller asked about an address; fail closed).
 */
export function classifyAddress(input: string): AddressDecision {
  const text = input.startsWith('[') && input.endsWith(']') ? input.slice(1, -1) : input;
  if (text.includes('%')) return { address: input, class: 'forbidden', range: 'scoped address (zone id)' };
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.parse(text);
  } catch {
    return { address: input, class: 'forbidden', range: 'malformed address' };
  }
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).zoneId) {
    return { address: input, class: 'forbidden', range: 'scoped address (zone id)' };
  }
  const decision = parsed.kind() === 'ipv4' ? classifyV4(parsed as ipaddr.IPv4) : classifyV6(parsed as ipaddr.IPv6);
  return { address: input, ...decision };
}

/** True when `text` is an IP literal in some notation (so no DNS lookup applies). */
export function isIpLiteral(text: string): boolean {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  return ipaddr.isValid(bare);
}

function isAllowed(decision: AddressDecision, policy: AddressPolicy): boolean {
  switch (decision.class) {
    case 'public':
      return true;
    case 'loopback':
    case 'private':
      return policy.allowPrivate;
    case 'forbidden':
      return false;
  }
}

/** The guard's question for one address: allowed, or refused with a reason fit for a warning. */
export function decideAddress(
  address: string,
  policy: AddressPolicy,
): { allowed: true; decision: AddressDecision } | { allowed: false; decision: AddressDecision; reason: string } {
  const decision = classifyAddress(address);
  if (isAllowed(decision, policy)) return { allowed: true, decision };
  const why =
    decision.class === 'forbidden'
      ? `${address} is in ${decision.range}, which is never allowed`
      : `${address} is in ${decision.range}; private and loopback targets need MCP_ALLOW_PRIVATE_NETWORK or an MCP_PRIVATE_ALLOWLIST origin`;
  return { allowed: false, decision, reason: why };
}
