import { Type, type Static } from '@sinclair/typebox'
import { IsoTime } from './common'
import { TenantSummary } from './tenants'

const Counts = (what: string) =>
  Type.Object({
    requests: Type.Integer({ description: `Responses sent by both fronts (API and S3) ${what}` }),
    clientErrors: Type.Integer({ description: '4xx responses among them' }),
    serverErrors: Type.Integer({ description: '5xx responses among them' }),
  })

export const OverviewQuery = Type.Object(
  { limit: Type.Integer({ minimum: 1, maximum: 100, default: 20, description: 'How many tenants the usage table lists' }) },
  { additionalProperties: false },
)

/** The admin overview (#31): what an operator checks first, each figure read from a maintained total. */
export const Overview = Type.Object({
  server: Type.Object({
    version: Type.String(),
    startedAt: IsoTime,
    uptimeSeconds: Type.Integer({ description: 'Since this process (with --workers N: this worker) started' }),
    blobStore: Type.Union([Type.Literal('disk'), Type.Literal('s3')]),
    supportedFileTypes: Type.Array(Type.String(), {
      description:
        "The file types tenants' allowedFileTypes are chosen from: the spec's six, then the operator's additions (COFFER_FILE_TYPES / --file-types); [\"*\"] when the server takes any MIME type",
    }),
  }),
  dataDir: Type.Object({
    path: Type.String(),
    totalBytes: Type.Integer({ description: 'Size of the file system holding the data dir' }),
    freeBytes: Type.Integer({ description: 'What an unprivileged process may still write there (statfs f_bavail)' }),
  }),
  blobs: Type.Object({
    count: Type.Integer({ description: 'Stored contents, identical content counted once' }),
    bytes: Type.Integer(),
  }),
  requests: Type.Object({
    sinceStart: Counts('since this process started'),
    lastMinute: Type.Intersect([
      Counts('in the last 60 seconds'),
      Type.Object({
        requestsPerSecond: Type.Number(),
        errorsPerSecond: Type.Number({ description: '4xx and 5xx responses per second' }),
        windowSeconds: Type.Integer({ description: '60, or the uptime when shorter: what the rates are averaged over' }),
      }),
    ]),
  }),
  webhooks: Type.Object({
    pending: Type.Integer({ description: 'Events waiting for delivery or for a retry: the outbox backlog' }),
    dead: Type.Integer({ description: 'Events that failed every attempt (dead letters), re-drivable' }),
    oldestPendingAt: Type.Union([IsoTime, Type.Null()]),
  }),
  tenants: Type.Object({
    count: Type.Integer({ description: 'Live tenants' }),
    byUsage: Type.Array(TenantSummary, { description: 'The tenants using the most bytes, most first' }),
  }),
})
export type Overview = Static<typeof Overview>
