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
  {
    // Files on disk are touched by the blob store, the database and data-dir helpers, and the CLI
    // (its DEST checks); never by routes, services, contract or webhooks.
    files: ['src/**/*.ts'],
    ignores: ['src/blobs/**', 'src/db/**', 'src/lib/**', 'src/cli/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            { name: 'node:fs', message: 'No fs here: blob content goes through BlobStore (src/blobs/), data-dir files through src/lib/.' },
            { name: 'fs', message: 'No fs here: blob content goes through BlobStore (src/blobs/), data-dir files through src/lib/.' },
            { name: 'node:fs/promises', message: 'No fs here: blob content goes through BlobStore (src/blobs/).' },
          ],
          patterns: [{ group: ['**/blobs/layout'], message: 'Blob paths are private to src/blobs/: read content with BlobStore.open.' }],
        },
      ],
    },
  },
  {
    files: ['src/lib/**/*.ts', 'src/db/**/*.ts', 'src/cli/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['**/blobs/layout'], message: 'Blob paths are private to src/blobs/: read content with BlobStore.open.' }] },
      ],
    },
  },
  {
    // Services, contract and the stores know no HTTP framework.
    files: ['src/services/**/*.ts', 'src/contract/**/*.ts', 'src/blobs/**/*.ts', 'src/db/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [{ name: 'fastify', message: 'Services, contract, db and blobs know no HTTP: keep Fastify in src/http/.' }],
          patterns: [
            {
              group: ['**/http/*', '**/http/**', '**/cli/*', '**/app', '**/server'],
              message: 'Dependencies point inwards: fronts (http, cli) call services, never the reverse.',
            },
          ],
        },
      ],
    },
  },
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
