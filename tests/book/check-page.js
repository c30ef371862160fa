// Checks one page of the book as Chromium laid it out, at the width of its
// window; test_pages.sh adds this script to a copy of every page, and loads
// the page in a frame of the width to check (frame.html: headless Chromium
// makes no window narrower than 500 px). It sends what it found to the
// frame's parent, which writes it into its own page for --dump-dom to carry
// out: one line "problem<TAB>page<TAB>width<TAB>element<TAB>what is wrong"
// per problem, and a last line "checked ..." (without it, the script did not
// run, and the test fails).
//
// What is acceptable, and why:
// - The page itself never scrolls sideways: a reader who pans the whole page
//   loses the text column.
// - A listing (pre) or a table may be wider than the column and scroll
//   sideways, with a visible scrollbar: code is set line for line as in the
//   editor, and a number broken over two lines reads as two numbers. Neither
//   may be cut off where nothing scrolls.
// - A display equation is never clipped: not cut off, and not cut vertically
//   by the scroll box a sideways overflow makes (the tall parts of a sum or
//   a fraction are lost there). At a reader's width (700 px and more) it does
//   not scroll either: an equation read through a slot is not read; a long
//   one is broken with aligned. On a phone it may scroll, visibly.
// - A figure fits its column (it scales; it never scrolls) and has loaded:
//   an image with no pixels is a figure the reader does not get.
// - Every link inside the book lands: "#id" on an element of this page,
//   "NAME.html#id" on an element of that page.
'use strict';

const problems = [];
const page = location.pathname.split('/').pop();
const width = window.innerWidth;
const READER_WIDTH = 700;

function describe(el) {
  let name = el.tagName.toLowerCase();
  if (el.id) name += '#' + el.id;
  else if (el.classList.length) name += '.' + el.classList[0];
  const text = (el.textContent || el.getAttribute('alt') || '').replace(/\s+/g, ' ').trim();
  return text ? `${name} "${text.slice(0, 50)}"` : name;
}

function problem(el, what) {
  problems.push(['problem', page, width + 'px', describe(el), what].join('\t'));
}

function scrolls(style) { return style.overflowX === 'auto' || style.overflowX === 'scroll'; }
function clips(style) { return style.overflowX === 'hidden' || style.overflowX === 'clip'; }
function wider(el) { return el.scrollWidth > el.clientWidth + 1; }
function taller(el) { return el.scrollHeight > el.clientHeight + 1; }

// The window's edges, which nothing may cross (the page would scroll).
function sticksOut(el) {
  const box = el.getBoundingClientRect();
  return box.width > 0 && (box.left < -1 || box.right > width + 1);
}

// A box that scrolls sideways shows it: its scrollbar is not styled away.
// (Headless Chromium draws overlay scrollbars, which take no room, so the
// style is what can be checked.)
function visiblyScrolls(el, style) {
  return scrolls(style) && style.scrollbarWidth !== 'none';
}

function checkWide(el, { mayScroll }) {
  const style = getComputedStyle(el);
  if (sticksOut(el)) problem(el, 'crosses the edge of the window');
  if (!wider(el)) return;
  if (clips(style)) problem(el, `clipped: ${el.scrollWidth} px of content in ${el.clientWidth} px`);
  else if (!scrolls(style)) problem(el, `overflows its box: ${el.scrollWidth} px in ${el.clientWidth} px`);
  else if (!mayScroll) problem(el, `scrolls sideways (${el.scrollWidth} px in ${el.clientWidth} px)`);
  else if (!visiblyScrolls(el, style)) problem(el, 'scrolls sideways with no visible scrollbar');
}

function checkEquation(el) {
  checkWide(el, { mayScroll: width < READER_WIDTH });
  const style = getComputedStyle(el);
  if ((scrolls(style) || clips(style)) && taller(el)) {
    problem(el, `clipped vertically: ${el.scrollHeight} px of content in ${el.clientHeight} px`);
  }
}

function checkFigure(el) {
  if (sticksOut(el)) problem(el, 'crosses the edge of the window');
  const column = el.parentElement.getBoundingClientRect();
  if (el.getBoundingClientRect().width > column.width + 1) problem(el, 'wider than its column');
}

function checkImage(img) {
  if (!img.complete || img.naturalWidth === 0) problem(img, 'image did not load');
  checkFigure(img);
}

function checkSvg(svg) {
  if (svg.getBoundingClientRect().width === 0) problem(svg, 'figure has no width');
  checkFigure(svg);
}

// Another page of the book, read once (Chromium runs with
// --allow-file-access-from-files); null if it cannot be read.
const pages = {};
function otherPage(name) {
  if (!(name in pages)) {
    const request = new XMLHttpRequest();
    try {
      request.open('GET', name, false);
      request.send();
      pages[name] = request.responseText
        ? new DOMParser().parseFromString(request.responseText, 'text/html') : null;
    } catch (e) {
      pages[name] = null;
    }
  }
  return pages[name];
}

function checkLink(a) {
  const href = a.getAttribute('href');
  if (!href || /^[a-z][a-z0-9+.-]*:/i.test(href)) return;  // https:, mailto:, data:
  const [file, fragment] = href.split('#');
  const id = fragment === undefined ? '' : decodeURIComponent(fragment);
  let doc = document;
  if (file !== '') {
    if (!/\.html$/.test(file)) return;
    doc = otherPage(file);
    if (!doc) return problem(a, `link to ${href}: ${file} does not load`);
  }
  if (fragment !== undefined && !doc.getElementById(id)) problem(a, `link to ${href}: no element with that id`);
}

function check() {
  if (document.documentElement.scrollWidth > width + 1) {
    problem(document.documentElement, `the page scrolls sideways (${document.documentElement.scrollWidth} px)`);
  }
  const equations = document.querySelectorAll('math[display="block"]');
  const listings = document.querySelectorAll('pre');
  const tables = document.querySelectorAll('table');
  const images = document.querySelectorAll('img');
  const svgs = document.querySelectorAll('figure svg, p > svg');
  const links = document.querySelectorAll('a[href]');
  equations.forEach(checkEquation);
  listings.forEach((el) => checkWide(el, { mayScroll: true }));
  tables.forEach((el) => checkWide(el, { mayScroll: true }));
  document.querySelectorAll('figure').forEach((el) => checkWide(el, { mayScroll: false }));
  images.forEach(checkImage);
  svgs.forEach(checkSvg);
  links.forEach(checkLink);
  const summary = `checked ${page} at ${width}px: ${equations.length} equations,`
    + ` ${listings.length} listings, ${tables.length} tables, ${images.length + svgs.length} figures,`
    + ` ${links.length} links`;
  window.parent.postMessage(problems.concat([summary]).join('\n'), '*');
}

// After the fonts (the math font sets the equations' widths) and the images.
window.addEventListener('load', () => document.fonts.ready.then(check));
