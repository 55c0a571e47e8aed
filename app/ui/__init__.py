"""The semsearch UI in the browser (Streamlit): search a collection by meaning, read documents, add more.

``semsearch ui -c DIR`` runs ``PAGE_SCRIPT`` (``app/ui/page.py``) with
Streamlit; ``streamlit run app/ui/page.py -- -c DIR`` does too. The modules,
one concern each:

- ``page``: the page script: sign-in, the sidebar, then a document or the tabs.
- ``guard``: who is answered without a password (loopback addresses and ``Host`` names).
- ``signin`` and ``lockout``: the password form, and the pause after wrong passwords (no Streamlit).
- ``state``: the ``-c`` folder, the URL's parameters and the session's state.
- ``cache``: the open collection and its cached reads and searches.
- ``sidebar``: the collection picker, its stats and the search settings.
- ``pages`` and ``add``: the search, document, collection and empty-folder pages; the add page.
- ``markup`` and ``formatting``: icons, CSS and escaping; sizes, ages and labels as a person reads them.
- ``passages``: passages and documents as escaped HTML with their evidence marked.
- ``judging``: the "answers" / "does not answer" buttons on each hit and on the document view.
- ``quality``: the sidebar's quality on the collection's judgments, and what the last ``learn`` changed.
- ``opening``: the controls that open a hit's original where the hit is (a PDF at its page, else a download).
- ``folders``, ``filters``, ``json_input``, ``uploads``, ``originals``: what is not Streamlit: finding
  collections, metadata filters, typed JSON, indexing uploads or pasted text, and which original
  file a document names, whether it may be served, and the page that opens a PDF in the browser.

Streamlit puts the page script's folder first on ``sys.path``, so no module
here is named like a standard-library or installed module. Importing this
package imports nothing else.
"""

from pathlib import Path

PAGE_SCRIPT = Path(__file__).resolve().with_name("page.py")  # what `semsearch ui` hands to `streamlit run`
