// esbuild bundles imported stylesheets into app.css beside app.js.
declare module "*.css";
