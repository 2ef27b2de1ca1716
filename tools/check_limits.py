#!/usr/bin/env python3
"""Reports the files and functions over the code-size limits of docs/DEVELOPING.md: files over 700 lines in
kernels/, core/, gui/, cli/, scaleout/, profiler/ and functions over 80 lines (body, braces included) in their
C++ and CUDA sources. Functions are found by counting braces after comments and string literals are blanked:
a `{` whose preceding text holds a parameter list and that opens at namespace or class level starts one (a
heuristic; lambdas count within their function). Exit status 1 when anything exceeds a limit.
usage: tools/check_limits.py [--max-file N] [--max-function N] [folders...]"""
import argparse
import pathlib
import re
import sys

SOURCES = ('.cpp', '.h', '.cu', '.cuh', '.c')
CONTROL = re.compile(r'\b(if|for|while|switch|catch|do|else|return)\b')
SCOPE = re.compile(r'\b(namespace|struct|class|union|enum)\b[^()]*$')


def blank(text):
    """Comments and string/char literals replaced by spaces, newlines kept (line numbers stay)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i)); i = j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j])); i = j
        elif c == 'R' and text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(')' + (m.group(1) if m else '') + '"', i)
            j = n if end < 0 else end + len(m.group(1) if m else '') + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j])); i = j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(c + re.sub(r'[^\n]', ' ', text[i + 1:j]) + c); i = j + 1
        else:
            out.append(c); i += 1
    return ''.join(out)


def first_branches(text):
    """Preprocessor lines blanked, and every #else / #elif branch too (only the first branch of a
    conditional is read, so that both branches' braces are not counted)."""
    out, depth, skip_at = [], 0, None
    for line in text.split('\n'):
        d = re.match(r'\s*#\s*(\w+)', line)
        word = d.group(1) if d else ''
        if word in ('if', 'ifdef', 'ifndef'):
            depth += 1
        elif word in ('else', 'elif') and skip_at is None:
            skip_at = depth
        elif word == 'endif':
            if skip_at == depth:
                skip_at = None
            depth -= 1
        out.append('' if d or skip_at is not None else line)
    return '\n'.join(out)


def function_name(header):
    """The defined function's name: the last identifier before a parameter list at parenthesis depth 0
    (before a constructor's initialiser list when there is one)."""
    head = re.split(r'\)\s*:(?!:)', header)[0] + ')' if re.search(r'\)\s*:(?!:)', header) else header
    names, depth = [], 0
    for m in re.finditer(r'([~\w:]+)\s*(?=\()|[()]', head):
        tok = m.group(0)
        if tok == '(':
            depth += 1
        elif tok == ')':
            depth -= 1
        elif depth == 0:
            names.append(m.group(1))
    names = [n for n in names if n not in ('__launch_bounds__', 'alignas', 'decltype', 'noexcept')]
    return names[-1] if names else header.strip()[:40]


def functions(path):
    """(name, first line, lines) of every function defined at namespace or class level."""
    text = blank(path.read_text(errors='replace'))
    text = first_branches(text)
    stack, found, last = [], [], 0  # stack: 'scope' | 'func' | 'block'; last: where the current header starts
    for i, c in enumerate(text):
        if c in ';':
            last = i + 1
        elif c == '{':
            header = text[last:i]
            inside = any(s[0] != 'scope' for s in stack)
            if inside:
                kind = ('block', 0, '')
            elif SCOPE.search(header.replace('\n', ' ')) and '(' not in header.split('{')[-1].split('=')[0]:
                kind = ('scope', 0, '')
            elif '(' in header and not CONTROL.search(header.split('(')[0]):
                name = function_name(header)
                kind = ('func', text.count('\n', 0, i) + 1, name)
            else:
                kind = ('scope', 0, '')  # initialiser or extern "C" block: not a function
            stack.append(kind)
            last = i + 1
        elif c == '}':
            if stack:
                kind = stack.pop()
                if kind[0] == 'func':
                    end = text.count('\n', 0, i) + 1
                    found.append((kind[2], kind[1], end - kind[1] + 1))
            last = i + 1
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--max-file', type=int, default=700)
    ap.add_argument('--max-function', type=int, default=80)
    ap.add_argument('folders', nargs='*', default=['kernels', 'core', 'gui', 'cli', 'scaleout', 'profiler'])
    a = ap.parse_args()
    root = pathlib.Path(__file__).resolve().parent.parent
    over = 0
    for folder in a.folders:
        for p in sorted((root / folder).rglob('*')):
            if p.suffix not in SOURCES or not p.is_file():
                continue
            rel = p.relative_to(root)
            lines = p.read_text(errors='replace').count('\n')
            if lines > a.max_file:
                print(f'file     {rel}: {lines} lines (limit {a.max_file})')
                over += 1
            for name, line, length in functions(p):
                if length > a.max_function:
                    print(f'function {rel}:{line} {name}: {length} lines (limit {a.max_function})')
                    over += 1
    print(f'{over} over the limits')
    return 1 if over else 0


if __name__ == '__main__':
    sys.exit(main())
