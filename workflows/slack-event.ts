// Filled in by its feature.
export {};
