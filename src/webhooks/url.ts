import { validationError } from '../errors'

/** Parses a webhook URL; it must be an absolute http(s) URL with a host (contract: Webhooks). */
export function parseWebhookUrl(raw: string): URL {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw validationError('/webhookUrl', 'must be an absolute http(s) URL')
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') {
    throw validationError('/webhookUrl', 'must be an absolute http(s) URL')
  }
  return url
}
