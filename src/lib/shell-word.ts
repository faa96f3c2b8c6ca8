/** `text` as one shell word: as is when it is safe, else single-quoted. */
export function shellWord(text: string): string {
  return /^[A-Za-z0-9_./:=@%+,-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`
}
