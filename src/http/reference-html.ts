import { Marked, type Tokens } from 'marked'
import { REFERENCE_PAGES } from '../lib/reference-pages'

/**
 * The repository's Markdown pages (the README and src/docs/) as the HTML GET /docs/reference/:page
 * serves. Links between the pages become links between the served pages, headings get GitHub's
 * ids so that every link to a page and its `#anchor` lands, and what the server does not serve (a script, a test
 * screenshot, a folder) is shown as text. The pages are the repository's own, never a user's.
 */

/** The page name of each repository path (`src/docs/cli.md` → `cli`). */
const PAGE_OF_PATH = new Map(Object.entries(REFERENCE_PAGES).map(([name, file]) => [file, name]))

/** `a/b/../c` → `a/c`: a link's target inside the repository, from the directory of the page that has it. */
function resolve(fromFile: string, target: string): string {
  const parts = fromFile.split('/').slice(0, -1)
  for (const p of target.split('/')) {
    if (p === '..') parts.pop()
    else if (p !== '.' && p !== '') parts.push(p)
  }
  return parts.join('/')
}

const escapeHtml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')

/** GitHub's heading id: lower case, punctuation dropped, spaces to hyphens (repeats numbered by the caller). */
export function slug(text: string): string {
  return text
    .replace(/<[^>]+>/g, '')
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-')
}

/**
 * Where a link of the page at `file` goes when served: a served page (`cli`, `cli#anchor`), an
 * anchor of the same page, an absolute URL as it is; undefined when the target is not served.
 */
export function servedHref(file: string, href: string): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(href) || href.startsWith('#')) return href
  const hash = href.indexOf('#')
  const target = resolve(file, hash < 0 ? href : href.slice(0, hash))
  const page = PAGE_OF_PATH.get(target)
  if (page === undefined) return undefined
  return `${page}${hash < 0 ? '' : href.slice(hash)}`
}

/** A page's HTML body (without the surrounding document) and its title (its first heading). */
export function renderPage(file: string, markdown: string): { title: string; html: string } {
  const seen = new Map<string, number>()
  let title = ''
  const marked = new Marked({
    gfm: true,
    renderer: {
      heading({ tokens, depth, text }: Tokens.Heading) {
        const base = slug(text)
        const n = seen.get(base) ?? 0
        seen.set(base, n + 1)
        if (title === '') title = text.replace(/`/g, '')
        return `<h${depth} id="${escapeHtml(n === 0 ? base : `${base}-${n}`)}">${this.parser.parseInline(tokens)}</h${depth}>\n`
      },
      link({ href, title: linkTitle, tokens }: Tokens.Link) {
        const inner = this.parser.parseInline(tokens)
        const to = servedHref(file, href)
        if (to === undefined) return inner
        return `<a href="${escapeHtml(to)}"${linkTitle ? ` title="${escapeHtml(linkTitle)}"` : ''}>${inner}</a>`
      },
      // The README's screenshots are files of the repository the server does not carry: their text instead.
      html({ text }: Tokens.HTML | Tokens.Tag) {
        return text.replace(/<img\s[^>]*>/g, (img) => {
          const alt = /\salt="([^"]*)"/.exec(img)?.[1]
          return alt ? `<em class="picture">(Picture: ${alt})</em>` : ''
        })
      },
      image({ text }: Tokens.Image) {
        return text ? `<em class="picture">(Picture: ${escapeHtml(text)})</em>` : ''
      },
    },
  })
  const html = marked.parse(markdown, { async: false })
  return { title, html }
}
