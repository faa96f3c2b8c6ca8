import type { BucketConfigsService } from './bucket-configs'

/**
 * A bucket's CORS rules (the S3 CORSConfiguration, Amazon S3 User Guide "CORS configuration"), kept
 * as the bucket's 'cors' configuration document, and the matching of a browser's request against
 * them. Both fronts read the same rules from here.
 */
export interface CorsRule {
  id?: string
  allowedOrigins: string[]
  allowedMethods: string[]
  allowedHeaders: string[]
  exposeHeaders: string[]
  maxAgeSeconds?: number
}

const FAMILY = 'cors'
export const CORS_METHODS = new Set(['GET', 'PUT', 'POST', 'DELETE', 'HEAD'])
/** AWS's limit on a configuration's rules. */
export const MAX_CORS_RULES = 100

/** Why a configuration is refused, with the S3 code AWS answers it with. */
export class CorsConfigError extends Error {
  constructor(
    readonly code: 'MalformedXML' | 'InvalidRequest',
    message: string,
  ) {
    super(message)
  }
}

/** Refuses what AWS refuses: no rules or over 100, a rule without origin or method, an unknown method, two wildcards. */
export function validateCorsRules(rules: readonly CorsRule[]): void {
  if (rules.length === 0 || rules.length > MAX_CORS_RULES) throw new CorsConfigError('MalformedXML', `A CORS configuration holds 1 to ${MAX_CORS_RULES} rules`)
  for (const rule of rules) {
    if (rule.allowedOrigins.length === 0 || rule.allowedMethods.length === 0) {
      throw new CorsConfigError('MalformedXML', 'Each CORSRule needs an AllowedOrigin and an AllowedMethod')
    }
    if (rule.id !== undefined && rule.id.length > 255) throw new CorsConfigError('InvalidRequest', 'The ID of a CORSRule is at most 255 characters')
    for (const m of rule.allowedMethods) {
      if (!CORS_METHODS.has(m)) throw new CorsConfigError('InvalidRequest', `Found unsupported HTTP method in CORS config. Unsupported method is ${m}`)
    }
    for (const o of rule.allowedOrigins) {
      if (o.split('*').length > 2) throw new CorsConfigError('InvalidRequest', `AllowedOrigin "${o}" can not have more than one wildcard.`)
    }
    for (const h of rule.allowedHeaders) {
      if (h.split('*').length > 2) throw new CorsConfigError('InvalidRequest', `AllowedHeader "${h}" can not have more than one wildcard.`)
    }
    if (rule.maxAgeSeconds !== undefined && (!Number.isSafeInteger(rule.maxAgeSeconds) || rule.maxAgeSeconds < 0)) {
      throw new CorsConfigError('MalformedXML', 'MaxAgeSeconds is a non-negative integer')
    }
  }
}

/** `pattern` with at most one `*` matching any run of characters (AWS's wildcard), against `text`. */
function wildcard(pattern: string, text: string): boolean {
  const star = pattern.indexOf('*')
  if (star < 0) return pattern === text
  const head = pattern.slice(0, star)
  const tail = pattern.slice(star + 1)
  return text.length >= head.length + tail.length && text.startsWith(head) && text.endsWith(tail)
}

/**
 * The first rule that allows this origin, method and (for a preflight) request headers, as AWS
 * evaluates them: origins compared as spelt (with one wildcard), headers case-insensitively.
 */
export function matchCorsRule(rules: readonly CorsRule[], origin: string, method: string, requestHeaders: readonly string[] = []): CorsRule | undefined {
  return rules.find(
    (r) =>
      r.allowedMethods.includes(method) &&
      r.allowedOrigins.some((o) => wildcard(o, origin)) &&
      requestHeaders.every((h) => r.allowedHeaders.some((a) => wildcard(a.toLowerCase(), h.toLowerCase()))),
  )
}

/** The CORS configuration of buckets (a workspace resolved within its tenant by the caller). */
export class BucketCorsService {
  constructor(private readonly configs: BucketConfigsService) {}

  get(workspaceId: string): CorsRule[] | undefined {
    return this.configs.get<CorsRule[]>(workspaceId, FAMILY)
  }

  put(workspaceId: string, rules: CorsRule[]): void {
    validateCorsRules(rules)
    this.configs.put(workspaceId, FAMILY, rules)
  }

  delete(workspaceId: string): boolean {
    return this.configs.delete(workspaceId, FAMILY)
  }

  /** The rules of a tenant's bucket by name, in one read (every response with an Origin asks). */
  ofBucket(tenantId: string, bucket: string): CorsRule[] | undefined {
    return this.configs.ofBucket<CorsRule[]>(tenantId, bucket, FAMILY)
  }

  /** The rules of every tenant's bucket of that name, for a request that names no tenant (README, S3: CORS). */
  byBucketName(bucket: string): CorsRule[] {
    return this.configs.byBucketName<CorsRule[]>(bucket, FAMILY).flat()
  }
}
