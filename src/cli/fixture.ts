import fs from 'node:fs'
import path from 'node:path'
import { timingSafeEqual } from 'node:crypto'
import type { Config } from '../config'
import type { Core } from '../core'
import type { AuthenticatedTenant } from '../db/repos/tenants'
import { AppError } from '../errors'
import { isBucketName } from '../s3/buckets'
import { S3Error } from '../s3/errors'
import type { SigningContext } from '../s3/sigv4'
import { OperatorError } from './startup-errors'
import { UsageError } from './io'
import { contentTypeOf } from './content-types'
import { UNLIMITED_QUOTA } from '../lib/file-types'

/**
 * What a CI fixture (#28) is given instead of generating: the tenant's API key, its S3 pair, and
 * buckets to create (some seeded from a directory). Read from the configuration and `--bucket`.
 */
export interface FixtureSettings {
  tenantApiKey?: string
  s3?: { accessKeyId: string; secretAccessKey: string }
  buckets: BucketSeed[]
}

export interface BucketSeed {
  name: string
  /** Absolute path of the directory whose files become the bucket's objects. */
  dir?: string
}

/** The tenant a fixture runs as: its key (when known: created now or given) and S3 pair. */
export interface FixtureTenant {
  tenant: AuthenticatedTenant
  apiKey?: string
  s3?: { accessKeyId: string; secretAccessKey: string }
}

/**
 * The fixture settings of `config` and `--bucket` flags (which replace COFFER_S3_BUCKETS, as
 * flags do env). Bucket names and directories are checked now, before anything is created.
 */
export function fixtureSettings(config: Config, bucketFlags: string[] | undefined): FixtureSettings {
  const specs = bucketFlags ?? config.s3Buckets?.split(',').filter((s) => s.trim() !== '') ?? []
  const source = bucketFlags ? '--bucket' : 'COFFER_S3_BUCKETS'
  const buckets: BucketSeed[] = []
  for (const spec of specs) {
    const eq = spec.indexOf('=')
    const name = (eq < 0 ? spec : spec.slice(0, eq)).trim()
    if (!isBucketName(name)) {
      throw new UsageError(`${source} ${JSON.stringify(name)} is not a bucket name (3-63 characters: a-z, 0-9, dot, hyphen; not an IP address)`)
    }
    if (buckets.some((b) => b.name === name)) throw new UsageError(`${source} names the bucket ${name} twice`)
    if (eq < 0) {
      buckets.push({ name })
      continue
    }
    const dir = path.resolve(spec.slice(eq + 1))
    let st: fs.Stats
    try {
      st = fs.statSync(dir)
    } catch {
      throw new OperatorError(`${source} ${name}=${spec.slice(eq + 1)}: no such directory (${dir})`)
    }
    if (!st.isDirectory()) throw new OperatorError(`${source} ${name}=${spec.slice(eq + 1)}: not a directory (${dir})`)
    // Walked once now so that a file that cannot be read stops the start before anything exists.
    filesUnder(dir)
    buckets.push({ name, dir })
  }
  return {
    ...(config.tenantApiKey !== undefined ? { tenantApiKey: config.tenantApiKey } : {}),
    ...(config.s3AccessKeyId !== undefined && config.s3SecretAccessKey !== undefined
      ? { s3: { accessKeyId: config.s3AccessKeyId, secretAccessKey: config.s3SecretAccessKey } }
      : {}),
    buckets,
  }
}

/** Whether `settings` ask for anything a plain `coffer serve` would not do. */
export const hasFixture = (s: FixtureSettings): boolean => s.tenantApiKey !== undefined || s.s3 !== undefined || s.buckets.length > 0

/**
 * A fixture tenant's quota: unlimited, since a CI job's uploads are bounded by the job, not by a
 * quota meant for tenants sharing a server; COFFER_DEFAULT_QUOTA_BYTES, when set, is used instead.
 */
const fixtureQuota = (core: Core): number => core.config.defaultQuotaBytes ?? UNLIMITED_QUOTA

/**
 * The ephemeral instance's tenant: created with the given key and pair, or generated ones. The
 * S3 pair only when the S3 listener runs.
 */
export function createEphemeralTenant(core: Core, settings: FixtureSettings, withS3: boolean): FixtureTenant & { apiKey: string } {
  const { tenant, apiKey } = core.tenants.create({ name: 'ephemeral', keyKind: 'test', quotaBytes: fixtureQuota(core) }, settings.tenantApiKey)
  const s3 = withS3 ? core.s3Credentials.create(tenant.id, settings.s3) : undefined
  return { tenant: core.tenants.authenticate(apiKey)!, apiKey, ...(s3 ? { s3: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey } } : {}) }
}

const sameSecret = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b))

/**
 * A persistent data dir's fixture tenant (#28). At the first start (the data dir has no tenant
 * yet) it is created with the given key and pair. Later starts must give the same values: a key
 * or pair the data dir does not hold is refused (never silently replaced, never silently ignored).
 */
export function persistentTenant(core: Core, settings: FixtureSettings): FixtureTenant {
  const { tenantApiKey, s3 } = settings
  const dataDir = core.config.dataDir
  const byKey = tenantApiKey === undefined ? undefined : core.tenants.authenticate(tenantApiKey)
  const byPair = s3 === undefined ? undefined : core.s3Credentials.lookup(s3.accessKeyId)
  if (byKey === undefined && byPair === undefined) {
    if (tenantApiKey === undefined && s3 === undefined) {
      throw new UsageError(
        '--bucket (COFFER_S3_BUCKETS) without --ephemeral needs the tenant: set --tenant-api-key or --s3-access-key-id as at the first start',
      )
    }
    if (!core.tenants.none()) {
      const names = given(settings)
      throw new OperatorError(
        `${names.join(' and ')} ${names.length > 1 ? 'are' : 'is'} not the data dir's (${dataDir}, which has tenants): fixed credentials are set at the first start of a new data dir only; give the values of its first start, drop them, or use an empty data dir`,
      )
    }
    const { tenant, apiKey } = core.tenants.create({ name: 'default', quotaBytes: fixtureQuota(core) }, tenantApiKey)
    if (s3) core.s3Credentials.create(tenant.id, s3)
    return { tenant: core.tenants.authenticate(apiKey)!, apiKey, ...(s3 ? { s3 } : {}) }
  }
  const mismatch = (what: string) =>
    new OperatorError(
      `${what} differs from the data dir's (${dataDir}), set at its first start: give the same value, or use an empty data dir (a key is never replaced at start)`,
    )
  if (tenantApiKey !== undefined && byKey === undefined) throw mismatch('--tenant-api-key (COFFER_TENANT_API_KEY)')
  if (s3 !== undefined && byPair === undefined) throw mismatch('--s3-access-key-id (COFFER_S3_ACCESS_KEY_ID)')
  if (s3 !== undefined && byPair !== undefined && !sameSecret(byPair.secret, s3.secretAccessKey))
    throw mismatch('--s3-secret-access-key (COFFER_S3_SECRET_ACCESS_KEY)')
  if (byKey && byPair && byKey.id !== byPair.tenant.id) throw mismatch('--tenant-api-key and --s3-access-key-id belong to two tenants: the pair')
  const tenant = (byKey ?? byPair?.tenant)!
  return { tenant, ...(tenantApiKey !== undefined ? { apiKey: tenantApiKey } : {}), ...(s3 ? { s3 } : {}) }
}

const given = (s: FixtureSettings): string[] =>
  [
    s.tenantApiKey !== undefined ? '--tenant-api-key (COFFER_TENANT_API_KEY)' : undefined,
    s.s3 ? '--s3-access-key-id (COFFER_S3_ACCESS_KEY_ID)' : undefined,
  ].filter((x) => x !== undefined)

/** Plain files only: an aws-chunked body is the only kind whose signing context is read. */
const PLAIN_BODY = undefined as unknown as SigningContext

/**
 * Creates the buckets the tenant lacks and seeds those created now from their directories,
 * through the S3 PutObject path (quotas, content addressing, replace semantics). A bucket that
 * exists already (a later start of a persistent data dir) is left as it is. Returns what it did.
 */
export async function createBuckets(
  core: Core,
  tenant: AuthenticatedTenant,
  buckets: BucketSeed[],
): Promise<{ name: string; created: boolean; objects: number }[]> {
  const done: { name: string; created: boolean; objects: number }[] = []
  for (const b of buckets) {
    if (core.s3.buckets.list(tenant).some((w) => w.slug === b.name)) {
      done.push({ name: b.name, created: false, objects: 0 })
      continue
    }
    core.s3.buckets.create(tenant, b.name)
    let objects = 0
    if (b.dir !== undefined) {
      for (const file of filesUnder(b.dir)) {
        const key = path.relative(b.dir, file).split(path.sep).join('/')
        const size = fs.statSync(file).size
        try {
          await core.s3.objects.put(
            tenant,
            b.name,
            key,
            { source: fs.createReadStream(file), payload: { kind: 'unsigned' }, signing: PLAIN_BODY, headers: { 'content-length': String(size) } },
            { contentType: contentTypeOf(key), meta: {} },
          )
        } catch (err) {
          if (err instanceof S3Error || err instanceof AppError)
            throw new OperatorError(`cannot seed bucket ${b.name} with ${file}: ${err.message}`, { cause: err })
          throw explainRead(err, file)
        }
        objects++
      }
    }
    done.push({ name: b.name, created: true, objects })
  }
  return done
}

function explainRead(err: unknown, file: string): unknown {
  const code = (err as NodeJS.ErrnoException).code
  return code === 'EACCES' || code === 'ENOENT' || code === 'EISDIR' ? new OperatorError(`cannot read ${file} to seed a bucket: ${code}`, { cause: err }) : err
}

/**
 * The regular files under `dir`, in byte order of their paths (the order S3 lists keys in).
 * Symbolic links to files are followed; links to directories are not (no cycles); sockets,
 * FIFOs and devices are refused, since reading one could block start-up.
 */
function filesUnder(dir: string): string[] {
  const out: string[] = []
  const walk = (d: string) => {
    for (const entry of fs.readdirSync(d, { withFileTypes: true })) {
      const full = path.join(d, entry.name)
      if (entry.isDirectory()) walk(full)
      else if (entry.isFile()) out.push(full)
      else if (entry.isSymbolicLink()) {
        const st = fs.statSync(full, { throwIfNoEntry: false })
        if (st?.isFile()) out.push(full)
        else if (!st?.isDirectory()) throw new OperatorError(`cannot seed a bucket with ${full}: a dangling or special symbolic link`)
      } else throw new OperatorError(`cannot seed a bucket with ${full}: not a regular file`)
    }
  }
  walk(dir)
  return out.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
}
