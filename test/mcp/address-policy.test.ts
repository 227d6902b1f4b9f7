/**
 * The guard's address decision, as pure unit tests: no network at all. This is where every
 * non-loopback range is tested (the machines running the suite forbid traffic to them).
 */
import { classifyAddress, decideAddress, isIpLiteral } from '../../src/mcp/ssrf/address-policy';

const closed = { allowPrivate: false };
const open = { allowPrivate: true };

describe('blocked IPv4 ranges, flag off', () => {
  it.each([
    ['0.0.0.0', 'forbidden'],
    ['0.255.255.255', 'forbidden'],
    ['10.0.0.1', 'private'],
    ['10.255.255.255', 'private'],
    ['100.64.0.1', 'private'],
    ['100.127.255.254', 'private'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['169.254.169.254', 'forbidden'],
    ['169.254.0.1', 'forbidden'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.0.0.8', 'forbidden'],
    ['192.0.2.1', 'forbidden'],
    ['192.88.99.1', 'forbidden'],
    ['192.168.1.1', 'private'],
    ['198.18.0.1', 'forbidden'],
    ['198.19.255.255', 'forbidden'],
    ['198.51.100.7', 'forbidden'],
    ['203.0.113.9', 'forbidden'],
    ['224.0.0.1', 'forbidden'],
    ['239.255.255.250', 'forbidden'],
    ['240.0.0.1', 'forbidden'],
    ['255.255.255.255', 'forbidden'],
  ])('%s is %s and refused', (address, klass) => {
    expect(classifyAddress(address).class).toBe(klass);
    const verdict = decideAddress(address, closed);
    expect(verdict.allowed).toBe(false);
    if (!verdict.allowed) expect(verdict.reason).toContain(address);
  });

  it.each([
    '1.1.1.1',
    '8.8.8.8',
    '93.184.216.34',
    '100.63.255.255',
    '100.128.0.0',
    '172.15.255.255',
    '172.32.0.0',
    '192.167.255.255',
    '198.17.255.255',
    '198.20.0.0',
    '223.255.255.255',
    '11.0.0.1',
    '126.255.255.255',
    '128.0.0.0',
  ])('public %s is allowed', (address) => {
    expect(classifyAddress(address).class).toBe('public');
    expect(decideAddress(address, closed).allowed).toBe(true);
  });
});

describe('blocked IPv6 ranges, flag off', () => {
  it.each([
    ['::', 'forbidden'],
    ['::1', 'loopback'],
    ['[::1]', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:10.0.0.1', 'private'],
    ['::ffff:169.254.169.254', 'forbidden'],
    ['::ffff:0.0.0.0', 'forbidden'],
    ['::127.0.0.1', 'loopback'],
    ['::7f00:1', 'loopback'],
    ['::a9fe:a9fe', 'forbidden'],
    ['64:ff9b::127.0.0.1', 'loopback'],
    ['64:ff9b::a9fe:a9fe', 'forbidden'],
    ['64:ff9b::c0a8:101', 'private'],
    // Local-use NAT64: every RFC 6052 reading is judged and the worst wins, so an address whose
    // other readings are 0.0.0.0 fails closed (forbidden) rather than passing as loopback.
    ['64:ff9b:1::7f00:1', 'forbidden'],
    ['64:ff9b:1:7f00:0:100::', 'forbidden'], // /48 embedding of 127.0.0.1
    ['64:ff9b:1:a0a:a:a0a:a0a:a0a', 'private'], // 10.10.10.10 in every reading
    ['2002:7f00:1::', 'loopback'],
    ['2002:a9fe:a9fe::1', 'forbidden'],
    ['2002:c0a8:0101::1', 'private'],
    ['fc00::1', 'private'],
    ['fd00::1', 'private'],
    ['fd12:3456:789a::1', 'private'],
    ['fd00:ec2::254', 'forbidden'],
    ['fe80::1', 'forbidden'],
    ['febf::1', 'forbidden'],
    ['fec0::1', 'private'],
    ['ff02::1', 'forbidden'],
    ['ff05::2', 'forbidden'],
    ['100::1', 'forbidden'],
    ['2001:db8::1', 'forbidden'],
    ['2001:2::1', 'forbidden'],
    // IPv4-translated ::ffff:0:0:0/96, whatever IPv4 address it carries.
    ['::ffff:0:0:0', 'forbidden'],
    ['::ffff:0:808:808', 'forbidden'],
    ['::ffff:0:7f00:1', 'forbidden'],
    ['0:0:0:0:ffff:0:ffff:ffff', 'forbidden'],
    // Teredo 2001::/32, whatever server and client it names.
    ['2001::', 'forbidden'],
    ['2001::1', 'forbidden'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'forbidden'],
    ['2001:0:ffff:ffff:ffff:ffff:ffff:ffff', 'forbidden'],
  ])('%s is %s and refused', (address, klass) => {
    expect(classifyAddress(address).class).toBe(klass);
    expect(decideAddress(address, closed).allowed).toBe(false);
  });

  it.each([
    '2606:4700:4700::1111',
    '2001:4860:4860::8888',
    '64:ff9b::808:808',
    '2002:808:808::1',
    '::ffff:8.8.8.8',
    '2001:3::1',
    '2001:1:ffff::1', // just past Teredo's 2001::/32
    '0:0:0:1:ffff:0:808:808', // just outside IPv4-translated ::ffff:0:0:0/96
  ])('public %s is allowed', (address) => {
    expect(classifyAddress(address).class).toBe('public');
    expect(decideAddress(address, closed).allowed).toBe(true);
  });
});

describe('IP literals in every notation', () => {
  it.each([
    ['2130706433', 'loopback'], // decimal
    ['0x7f000001', 'loopback'], // hex
    ['0177.0.0.1', 'loopback'], // octal
    ['0x7f.0.0.1', 'loopback'], // hex part
    ['127.1', 'loopback'], // short form
    ['017700000001', 'loopback'], // octal, one part
    ['2852039166', 'forbidden'], // 169.254.169.254 in decimal
    ['0xa9fea9fe', 'forbidden'],
    ['0251.0376.0251.0376', 'forbidden'],
    ['167772161', 'private'], // 10.0.0.1
    ['0', 'forbidden'], // 0.0.0.0
    ['[::ffff:127.0.0.1]', 'loopback'],
    ['0:0:0:0:0:ffff:7f00:0001', 'loopback'],
    ['0000:0000:0000:0000:0000:0000:0000:0001', 'loopback'],
  ])('%s is %s', (address, klass) => {
    expect(isIpLiteral(address)).toBe(true);
    expect(classifyAddress(address).class).toBe(klass);
  });

  it.each(['fe80::1%eth0', 'fe80::1%25eth0', '::1%lo', 'not-an-ip', '999.1.1.1', '1.2.3.4.5', '', ':::1'])(
    'scoped or malformed %p fails closed',
    (address) => {
      const decision = classifyAddress(address);
      expect(decision.class).toBe('forbidden');
      expect(decideAddress(address, open).allowed).toBe(false);
    },
  );
});

describe('the two settings', () => {
  it.each(['127.0.0.1', '::1', '10.1.2.3', '172.20.0.1', '192.168.0.10', '100.64.1.1', 'fd00::1', '::ffff:127.0.0.1', '2130706433'])(
    'loopback/private %s is allowed with the flag or an allowlisted origin',
    (address) => {
      expect(decideAddress(address, closed).allowed).toBe(false);
      expect(decideAddress(address, open).allowed).toBe(true);
    },
  );

  it.each([
    '169.254.169.254', // cloud metadata
    '169.254.1.1', // link-local
    'fe80::1', // link-local
    'fd00:ec2::254', // AWS IPv6 metadata
    '::ffff:0:808:808', // IPv4-translated
    '2001:0:4136:e378:8000:63bf:3fff:fdd2', // Teredo
    '100.100.100.200', // Alibaba metadata
    '::ffff:169.254.169.254',
    '64:ff9b::a9fe:a9fe',
    '224.0.0.251', // multicast
    'ff02::fb',
    '0.0.0.0',
    '::',
    '255.255.255.255',
  ])('link-local, metadata, multicast and unspecified %s stay blocked under both settings', (address) => {
    expect(decideAddress(address, closed).allowed).toBe(false);
    expect(decideAddress(address, open).allowed).toBe(false);
  });

  it('names the range in the refusal', () => {
    const verdict = decideAddress('169.254.169.254', open);
    expect(verdict.allowed).toBe(false);
    if (!verdict.allowed) expect(verdict.reason).toMatch(/169\.254\.0\.0\/16.*never allowed/);
    const mapped = decideAddress('::ffff:127.0.0.1', closed);
    if (!mapped.allowed) expect(mapped.reason).toMatch(/IPv4-mapped.*127\.0\.0\.0\/8 \(loopback\)/);
    expect(mapped.allowed).toBe(false);
    const teredo = decideAddress('2001::1', open);
    expect(teredo.allowed).toBe(false);
    if (!teredo.allowed) expect(teredo.reason).toMatch(/2001::\/32 \(Teredo\).*never allowed/);
    const translated = decideAddress('::ffff:0:7f00:1', open);
    expect(translated.allowed).toBe(false);
    if (!translated.allowed) expect(translated.reason).toMatch(/::ffff:0:0:0\/96 \(IPv4-translated\).*never allowed/);
  });
});
