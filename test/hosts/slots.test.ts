import { describe, expect, it } from "vitest";
import { Slots } from "../../src/hosts/slots.js";

describe("Slots", () => {
  it("holds at most max at once; the rest run in arrival order as slots free", async () => {
    const slots = new Slots(2);
    let open = 0;
    let most = 0;
    const order: number[] = [];
    const gates = Array.from({ length: 5 }, () => {
      let resolve = () => {};
      const promise = new Promise<void>((r) => (resolve = r));
      return { promise, resolve };
    });
    const runs = gates.map((g, i) =>
      slots.with(async () => {
        open++;
        most = Math.max(most, open);
        order.push(i);
        await g.promise;
        open--;
      }),
    );
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual([0, 1]);
    gates[1]!.resolve();
    gates[0]!.resolve();
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual([0, 1, 2, 3]);
    for (const g of gates) g.resolve();
    await Promise.all(runs);
    expect(order).toEqual([0, 1, 2, 3, 4]);
    expect(most).toBe(2);
  });

  it("releases once however often release is called, and on a throw", async () => {
    const slots = new Slots(1);
    const release = await slots.acquire();
    release();
    release();
    await expect(slots.with(() => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    const a = await slots.acquire();
    let second = false;
    const b = slots.acquire().then((r) => ((second = true), r));
    await new Promise((r) => setImmediate(r));
    expect(second).toBe(false);
    a();
    (await b)();
  });
});
