import net from 'node:net'
import dns from 'node:dns/promises'

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
] as const)
  blocked.addSubnet(addr, prefix, 'ipv6')

/** True when `address` (an IP literal) is one a webhook must not reach. */
export function isPrivateAddress(address: string): boolean {
  const bare = address.replace(/^\[|\]$/g, '')
  const family = net.isIP(bare)
  if (family === 0) return false
  if (family === 6) {
    // IPv4-mapped and IPv4-compatible forms (::ffff:10.0.0.1) reach the IPv4 address.
    const mapped = /^::(?:ffff:)?(\d+\.\d+\.\d+\.\d+)$/i.exec(bare)
    if (mapped) return blocked.check(mapped[1]!, 'ipv4')
    const hexMapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(bare)
    if (hexMapped) {
      const hi = parseInt(hexMapped[1]!, 16)
      const lo = parseInt(hexMapped[2]!, 16)
      return blocked.check(`${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`, 'ipv4')
    }
    return blocked.check(bare, 'ipv6')
  }
  return blocked.check(bare, 'ipv4')
}

/** Host names that always mean this machine (RFC 6761 §6.3). */
export function isLocalhostName(host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, '')
  return h === 'localhost' || h.endsWith('.localhost')
}

/** Resolves a host name to every address it has. */
export type Resolver = (hostname: string) => Promise<string[]>

export const systemResolver: Resolver = async (hostname) => (await dns.lookup(hostname, { all: true, verbatim: true })).map((a) => a.address)
