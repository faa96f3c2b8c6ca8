/** The MIME types Coffer stores (spec part 1), in the order the spec lists them. */
export const FILE_TYPES = ['image/jpeg', 'image/png', 'image/webp', 'image/gif', 'image/avif', 'application/pdf'] as const
export type FileType = (typeof FILE_TYPES)[number]

export const MAX_FILE_SIZE = 104_857_600
/** The spec's quota of a tenant created without one, unless COFFER_DEFAULT_QUOTA_BYTES says otherwise. */
export const DEFAULT_TENANT_QUOTA = 524_288_000
/**
 * A quota given as `unlimited`: stored as the largest safe integer (a byte count no store will reach),
 * so the quota checks need no special case and the API's quotaBytes stays a number.
 */
export const UNLIMITED_QUOTA = Number.MAX_SAFE_INTEGER

/** `*` in COFFER_FILE_TYPES (any type) and in a tenant's allowedFileTypes (any type the server supports). */
export const ANY_TYPE = '*'

/** A MIME type as the API takes it: lower-case `type/subtype`, RFC 6838's characters, no parameters. */
export const MIME_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$/

const SPEC_TYPES: readonly string[] = FILE_TYPES

/**
 * The file types the API accepts on this server: the spec's six, widened by the operator's
 * COFFER_FILE_TYPES (more MIME types, or `*` for any). Tenants' allowedFileTypes are chosen
 * from this set; a handshake's type must be in it and in the tenant's list.
 */
export class SupportedTypes {
  /** Whether any well-formed MIME type is supported (`*`). */
  readonly any: boolean
  /** The six, then the operator's additions in their order; `['*']` when any type is. */
  readonly list: readonly string[]

  constructor(setting: readonly string[] = []) {
    this.any = setting.includes(ANY_TYPE)
    this.list = this.any ? [ANY_TYPE] : [...SPEC_TYPES, ...setting.filter((t, i) => !SPEC_TYPES.includes(t) && setting.indexOf(t) === i)]
  }

  /** Whether the API takes `type` at all on this server. */
  supports(type: string): boolean {
    return this.any ? MIME_TYPE.test(type) : this.list.includes(type)
  }

  /** Whether a tenant whose list is `allowed` may upload `type` (the server must support it too). */
  allows(allowed: readonly string[], type: string): boolean {
    return this.supports(type) && (allowed.includes(ANY_TYPE) || allowed.includes(type))
  }

  /** The index of the first entry of `types` a tenant may not be given on this server, or -1. */
  unsupported(types: readonly string[]): number {
    return types.findIndex((t) => !(t === ANY_TYPE ? this.any : this.supports(t)))
  }

  /** A tenant's list as stored: the spec's types in the spec's order, then the others as given, without duplicates; `*` alone when given. */
  normalise(types: readonly string[]): string[] {
    if (types.includes(ANY_TYPE)) return [ANY_TYPE]
    return [...SPEC_TYPES.filter((t) => types.includes(t)), ...types.filter((t, i) => !SPEC_TYPES.includes(t) && types.indexOf(t) === i)]
  }

  /** What a refused type is told: the types this server supports. */
  describe(): string {
    return this.any ? 'any lower-case MIME type (type/subtype), or *' : this.list.join(', ')
  }
}

/** The spec's six and nothing more: what a server without COFFER_FILE_TYPES supports. */
export const SPEC_SUPPORTED = new SupportedTypes()
