import { validationError } from '../errors'
import { isLocalhostName, isPrivateAddress } from './ssrf'

/**
 * Parses a webhook URL at the handshake: an absolute http(s) URL with a host. Unless private
 * targets are allowed, a host that is a loopback/private/link-local literal or `localhost` is
 * refused here; names are resolved and checked again at every delivery.
 */
export function parseWebhookUrl(raw: string, allowPrivate: boolean): URL {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw validationError('/webhookUrl', 'must be an absolute http(s) URL')
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') {
    throw validationError('/webhookUrl', 'must be an absolute http(s) URL')
  }
  if (!allowPrivate && (isPrivateAddress(url.hostname) || isLocalhostName(url.hostname))) {
    throw validationError('/webhookUrl', 'must not point at a loopback, private or link-local address')
  }
  return url
}
