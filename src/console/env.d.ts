/** esbuild bundles imported stylesheets into the console's one CSS file. */
declare module '*.css'
