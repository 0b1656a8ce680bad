// The stores a test opens, closed after it. A store a test leaves open (a controller it simulates
// killed, a second store opened on the same directory) leaves its journal's FileHandle to the garbage
// collector, which node warns of (DEP0137) and says it will make an error. Closing one folds what it
// holds: after the test, before its directory is removed, that changes nothing the test saw.
import { StateStore } from "../../src/state/store.js";

export interface OpenStores {
  open: (...args: Parameters<typeof StateStore.open>) => Promise<StateStore>;
  /** Close every store opened since the last call, newest first; a close that fails is the test's past. */
  closeAll: () => Promise<void>;
}

export function openStores(): OpenStores {
  const opened: StateStore[] = [];
  return {
    open: async (...args) => {
      const store = await StateStore.open(...args);
      opened.push(store);
      return store;
    },
    closeAll: async () => {
      for (const store of opened.splice(0).reverse()) await store.close().catch(() => undefined);
    },
  };
}
