// Keyboard labelling: the key shown beside a choice picks it in the current question and
// moves to the next one, j/k move between questions, Enter records the label. Reads nothing
// but the page's own form; sends nothing but that form (the page's CSP: no connections).
"use strict";
(function () {
  const form = document.getElementById("label-form");
  if (!form) {
    return;
  }
  const fields = Array.from(form.querySelectorAll("fieldset.field"));
  let active = 0;

  function show() {
    fields.forEach(function (f, i) {
      f.classList.toggle("active", i === active);
    });
  }

  function move(step) {
    if (!fields.length) {
      return;
    }
    active = Math.max(0, Math.min(fields.length - 1, active + step));
    show();
    fields[active].scrollIntoView({ block: "nearest" });
  }

  function typing(target) {
    if (!(target instanceof HTMLElement)) {
      return false;
    }
    const tag = target.tagName;
    if (tag === "TEXTAREA" || tag === "SELECT" || target.isContentEditable) {
      return true;
    }
    return tag === "INPUT" && target.type !== "radio" && target.type !== "hidden";
  }

  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) {
      return;
    }
    if (e.target instanceof HTMLElement && e.target.closest("a, summary, button")) {
      return;
    }
    const key = e.key.length === 1 ? e.key.toLowerCase() : e.key;
    const field = fields[active];
    if (field && key.length === 1) {
      const choice = Array.from(field.querySelectorAll("input[type=radio]")).find(function (r) {
        return r.dataset.key && r.dataset.key.toLowerCase() === key;
      });
      if (choice) {
        e.preventDefault();
        choice.checked = true;
        move(1);
        return;
      }
    }
    if (key === "j") {
      e.preventDefault();
      move(1);
    } else if (key === "k") {
      e.preventDefault();
      move(-1);
    } else if (key === "Enter") {
      e.preventDefault();
      form.requestSubmit();
    }
  });

  fields.forEach(function (f, i) {
    f.addEventListener("focusin", function () {
      active = i;
      show();
    });
    f.addEventListener("click", function () {
      active = i;
      show();
    });
  });
  show();
})();
