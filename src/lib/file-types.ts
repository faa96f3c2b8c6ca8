/** The MIME types Coffer stores (spec part 1), in the order the spec lists them. */
export const FILE_TYPES = ['image/jpeg', 'image/png', 'image/webp', 'image/gif', 'image/avif', 'application/pdf'] as const
export type FileType = (typeof FILE_TYPES)[number]

export const MAX_FILE_SIZE = 104_857_600
export const DEFAULT_TENANT_QUOTA = 524_288_000
