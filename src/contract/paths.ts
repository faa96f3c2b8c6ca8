/**
 * The JSON API's paths that appear inside responses (file `url`, presigned upload path, signed
 * download URL) and webhook payloads. One place, so a view and the route that serves it agree.
 */
export const API_PREFIX = '/api/v1'

export const downloadPath = (fileId: string): string => `${API_PREFIX}/files/${fileId}/download`
export const uploadPath = (fileId: string): string => `${API_PREFIX}/upload/${fileId}`

/** A path carrying a signed token (presigned upload, signed download): `<path>?expires=…&token=…`. */
export const withToken = (path: string, grant: { expires: number; token: string }): string => `${path}?expires=${grant.expires}&token=${grant.token}`
