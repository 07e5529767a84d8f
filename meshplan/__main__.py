from meshplan.cli import main

raise SystemExit(main())
