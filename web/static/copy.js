// copy.js: a Copy button after every element marked data-copy (its value
// names what is copied, for screen readers; data-copy-text, when present,
// is the text copied instead of the element's). The pages work without
// it: the text stays selectable by hand. A click selects the text too, so
// that where the clipboard is refused, Ctrl+C finishes the job.
(function () {
	'use strict';
	function select(el) {
		var r = document.createRange();
		r.selectNodeContents(el);
		var s = window.getSelection();
		s.removeAllRanges();
		s.addRange(r);
	}
	document.querySelectorAll('[data-copy]').forEach(function (el) {
		var b = document.createElement('button');
		b.type = 'button';
		b.className = 'secondary copy';
		b.textContent = 'Copy';
		if (el.getAttribute('data-copy')) {
			b.setAttribute('aria-label', 'Copy the ' + el.getAttribute('data-copy'));
		}
		var say = function (msg) {
			b.textContent = msg;
			setTimeout(function () { b.textContent = 'Copy'; }, 2500);
		};
		b.addEventListener('click', function () {
			var text = el.hasAttribute('data-copy-text') ? el.getAttribute('data-copy-text') : el.textContent;
			select(el);
			if (navigator.clipboard && window.isSecureContext) {
				navigator.clipboard.writeText(text).then(function () { say('Copied'); }, function () { say('Selected: press Ctrl+C'); });
			} else {
				say('Selected: press Ctrl+C');
			}
		});
		el.insertAdjacentElement('afterend', b);
	});
})();
