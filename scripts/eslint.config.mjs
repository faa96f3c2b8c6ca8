// ESLint flat config (run by `npm run lint`, which passes --config: the top level holds only
// package.json, tsconfig.json and the source folders). Type-aware typescript-eslint rules, an
// import cycle check, and the layering rules of the code map (README, Code map) as errors.
import js from '@eslint/js'
import tseslint from 'typescript-eslint'
import { importX } from 'eslint-plugin-import-x'
import { fileURLToPath } from 'node:url'
import path from 'node:path'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

/** SQL statements are prepared and run only by src/db/ (repos and the database helpers). */
const SQL_OUTSIDE_DB = {
  selector: 'CallExpression[callee.property.name=/^(prepare|exec|pragma|backup)$/]:not([callee.object.regex])',
  message: 'SQL lives in src/db/: add a repo method (src/db/repos/) and call it from a service.',
}

const NO_FS = ['node:fs', 'fs', 'node:fs/promises', 'fs/promises'].map((name) => ({
  name,
  message: 'No fs here: blob content goes through BlobStore (src/blobs/), data-dir files through src/lib/.',
}))
const NO_BLOB_PATHS = { group: ['**/blobs/layout'], message: 'Blob paths are private to src/blobs/: read content with BlobStore.open.' }
const NO_HTTP = [{ name: 'fastify', message: 'Services, contract, db and blobs know no HTTP: keep Fastify in src/http/.' }]
const INWARDS = {
  group: ['**/http/*', '**/http/**', '**/cli/*', '**/app', '**/server'],
  message: 'Dependencies point inwards: fronts (http, cli) call services, never the reverse.',
}

/**
 * The code map's layering (README, Code map) as no-restricted-imports, one entry per folder (a
 * later flat-config entry replaces a rule's options, so each folder gets its whole list here):
 * - files on disk: only src/blobs, src/db, src/lib and src/cli import fs;
 * - blob paths: only src/blobs knows the layout;
 * - services, contract, db and blobs know no HTTP framework and import no front.
 */
function layering() {
  const rule = (paths, patterns) => ({ 'no-restricted-imports': ['error', { paths, patterns }] })
  return [
    { files: ['src/*.ts', 'src/http/**/*.ts', 'src/s3/**/*.ts', 'src/webhooks/**/*.ts'], rules: rule(NO_FS, [NO_BLOB_PATHS]) },
    { files: ['src/services/**/*.ts', 'src/contract/**/*.ts'], rules: rule([...NO_FS, ...NO_HTTP], [NO_BLOB_PATHS, INWARDS]) },
    { files: ['src/db/**/*.ts'], rules: rule(NO_HTTP, [NO_BLOB_PATHS, INWARDS]) },
    { files: ['src/blobs/**/*.ts'], rules: rule(NO_HTTP, [INWARDS]) },
    { files: ['src/lib/**/*.ts', 'src/cli/**/*.ts'], rules: rule([], [NO_BLOB_PATHS]) },
  ]
}

export default tseslint.config(
  { ignores: ['dist/**', 'data/**', 'node_modules/**', 'scripts/eslint.config.mjs'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: root } },
    plugins: { 'import-x': importX },
    settings: { 'import-x/resolver': { node: { extensions: ['.ts', '.js', '.mjs', '.json'] } }, 'import-x/extensions': ['.ts', '.mjs', '.js'] },
    rules: {
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      // Fastify route handlers and plugins are async functions by contract, awaited or not.
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' }],
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/db/**'],
    rules: { 'no-restricted-syntax': ['error', SQL_OUTSIDE_DB] },
  },
  ...layering(),
  {
    // Tests read response bodies as untyped JSON on purpose (the assertions check their shape), and
    // tap's top-level t.test() calls are promises tap itself awaits.
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unnecessary-type-assertion': 'off',
      '@typescript-eslint/no-floating-promises': [
        'error',
        { allowForKnownSafePromises: [{ from: 'package', package: '@tapjs/core', name: 'PromiseWithSubtest' }] },
      ],
    },
  },
  {
    files: ['**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      globals: {
        process: 'readonly',
        console: 'readonly',
        URL: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        __dirname: 'readonly',
        performance: 'readonly',
        fetch: 'readonly',
      },
    },
  },
)
