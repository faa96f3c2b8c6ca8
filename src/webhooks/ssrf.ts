import net from 'node:net'

/**
 * Addresses a webhook may not reach unless COFFER_WEBHOOK_ALLOW_PRIVATE is set: loopback,
 * link-local, private, carrier-grade NAT, unspecified, multicast and broadcast (contract: Webhooks).
 * Without this, any tenant could make the server probe its own network (SSRF).
 */
const blocked = new net.BlockList()
for (const [addr, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  blocked.addSubnet(addr, prefix, 'ipv4')
for (const [addr, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fe80::', 10],
  ['fc00::', 7],
  ['ff00::', 8],
  // Transition and special forms that reach an IPv4 address or a network of their own (#12 item 9):
  ['fec0::', 10], // site-local (deprecated, still routed inside some networks)
  ['100::', 64], // discard-only
  ['2002::', 16], // 6to4: the IPv4 address is embedded, and relays forward to it
  ['2001::', 32], // Teredo: an obfuscated IPv4 address and port
  ['2001:db8::', 32], // documentation
  ['64:ff9b:1::', 48], // local-use NAT64: the operator's own translators
] as const)
  blocked.addSubnet(addr, prefix, 'ipv6')

/**
 * IPv6 prefixes (first 96 bits) whose last 32 bits are an IPv4 address that the packet reaches:
 * IPv4-compatible `::a.b.c.d`, IPv4-mapped `::ffff:a.b.c.d`, SIIT `::ffff:0:a.b.c.d`, and the
 * well-known NAT64 prefix `64:ff9b::a.b.c.d`. The embedded address is checked as IPv4.
 */
const EMBEDDING_PREFIXES = [
  [0, 0, 0, 0, 0, 0],
  [0, 0, 0, 0, 0, 0xffff],
  [0, 0, 0, 0, 0xffff, 0],
  [0x64, 0xff9b, 0, 0, 0, 0],
]

/** The eight 16-bit groups of a valid IPv6 literal (zone id ignored, dotted IPv4 tail expanded). */
function ipv6Groups(address: string): number[] {
  let text = address.split('%')[0]!
  const tail: number[] = []
  const dotted = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (dotted) {
    const [a, b, c, d] = dotted[2]!.split('.').map(Number) as [number, number, number, number]
    tail.push((a << 8) | b, (c << 8) | d)
    text = dotted[1]!.endsWith('::') ? dotted[1]! : dotted[1]!.slice(0, -1)
  }
  const [head, rest] = text.split('::') as [string, string | undefined]
  const parse = (part: string | undefined) => (part ? part.split(':').map((g) => parseInt(g, 16)) : [])
  const left = parse(head)
  const right = [...parse(rest), ...tail]
  const zeros = rest === undefined ? [] : new Array<number>(8 - left.length - right.length).fill(0)
  return [...left, ...zeros, ...right]
}

/** True when `address` (an IP literal) is one a webhook must not reach. */
export function isPrivateAddress(address: string): boolean {
  const bare = address.replace(/^\[|\]$/g, '')
  const family = net.isIP(bare)
  if (family === 0) return false
  if (family === 4) return blocked.check(bare, 'ipv4')
  const g = ipv6Groups(bare)
  // An embedded IPv4 address is judged as that address, whichever way it is written.
  if (EMBEDDING_PREFIXES.some((p) => p.every((v, i) => g[i] === v)) && !(g.slice(0, 7).every((v) => v === 0) && g[7]! <= 1)) {
    return blocked.check(`${g[6]! >> 8}.${g[6]! & 255}.${g[7]! >> 8}.${g[7]! & 255}`, 'ipv4')
  }
  return blocked.check(g.map((v) => v.toString(16)).join(':'), 'ipv6')
}

/** Host names that always mean this machine (RFC 6761 §6.3). */
export function isLocalhostName(host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, '')
  return h === 'localhost' || h.endsWith('.localhost')
}

/** Resolves a host name to every address it has. */
export type Resolver = (hostname: string) => Promise<string[]>

export const systemResolver: Resolver = async (hostname) =>
  // Loaded by the first delivery, not at every start (#28).
  (await process.getBuiltinModule('node:dns/promises').lookup(hostname, { all: true, verbatim: true })).map((a) => a.address)
