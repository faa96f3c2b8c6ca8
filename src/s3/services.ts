import type { ObjectLock } from '../services/object-lock'
import type { ObjectsRepo } from '../db/repos/objects'
import { S3Buckets, type S3Deps } from './buckets'
import { S3Objects } from './objects'
import { S3Multipart } from './multipart'
import type { ObjectVersions } from '../services/versions'

/** The S3 front's operations on the core's repositories, store and quotas. */
export interface S3Services {
  buckets: S3Buckets
  objects: S3Objects
  multipart: S3Multipart
  objectsRepo: ObjectsRepo
  /** Object versions and buckets' versioning state (#25), shared with the API. */
  versions: ObjectVersions
  /** Object lock (#25), shared with the API. */
  objectLock: ObjectLock
}

export function createS3Services(deps: S3Deps): S3Services {
  const buckets = new S3Buckets(deps)
  const objects = new S3Objects(deps, buckets)
  return {
    buckets,
    objects,
    multipart: new S3Multipart(deps, buckets, objects),
    objectsRepo: deps.objects,
    versions: deps.versions,
    objectLock: deps.objectLock,
  }
}
